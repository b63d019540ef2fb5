package hcloudscale_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestDebugLogsHoldNoSecrets scales up with every log level on and checks
// that the API traffic was logged, without the token and the cloud-init
// text.
func TestDebugLogsHoldNoSecrets(t *testing.T) {
	const token = "s3cr3t-t0ken-0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCD"
	core, logs := observer.New(zapcore.DebugLevel)
	e := newFaultEnv(t, faultOptions{
		fake:    []hcloudtest.Option{hcloudtest.WithToken(token)},
		cluster: []hcloudscale.Option{hcloudscale.WithLogger(zap.New(core))},
	})
	defer e.stop()
	// The subnet pool makes every kind of create-side request: create
	// (with user data), attach, power on; a failed create adds an error
	// path, and the scale-down deletes.
	e.api().FailAction("start_server", "", "")
	p := e.c.Pool("subnet")
	if err := p.IncreaseSize(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteInstances(context.Background(), ids(p)); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	e.stop()

	enc := zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig())
	var all strings.Builder
	for _, entry := range logs.All() {
		buf, err := enc.EncodeEntry(entry.Entry, entry.Context)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(buf.Bytes())
		buf.Free()
	}
	text := all.String()
	for _, want := range []string{`"/v1/servers"`, `/actions/attach_to_network`, `/actions/poweron`, `user_data`, `root_password`} {
		if !strings.Contains(text, want) {
			t.Errorf("the debug log lacks %q; the test would not see a leak there", want)
		}
	}
	for _, secret := range []string{token, "abcdef.0123456789abcdef", "kubeadm join", "#cloud-config"} {
		if strings.Contains(text, secret) {
			t.Errorf("the log contains the secret %q", secret)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d log entries, %d bytes, no secret", logs.Len(), len(text))
}
