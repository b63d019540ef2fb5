package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestLogsCarryNoSecrets(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 10), WithLogger(zap.New(core)))
	// Failures of every kind, so that every log path with errors runs.
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "invalid_input", Message: "invalid input in field 'user_data'"})
	e.fake.FailRequest("POST /servers", 2, hcloudtest.RequestFault{Drop: true, AfterEffect: true})
	e.fake.FailAction("start_server", "server_error", "broken")
	if err := p.IncreaseSize(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	if err := p.DeleteInstances(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	time.Sleep(10 * time.Millisecond)

	if logs.Len() == 0 {
		t.Fatal("no logs captured")
	}
	for _, entry := range logs.All() {
		line := entry.Message
		for k, v := range entry.ContextMap() {
			line += " " + k + "=" + strings.TrimSpace(toString(v))
		}
		for _, secret := range []string{"kubeadm join", "abcdef.0123456789abcdef", hcloudtest.DefaultToken} {
			if strings.Contains(line, secret) {
				t.Errorf("log entry contains a secret %q: %s", secret, line)
			}
		}
		if entry.ContextMap()["pool"] != "workers" && entry.LoggerName == "pool" {
			t.Errorf("pool log entry without the pool field: %s", line)
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return fmt.Sprintf("%v", v)
}
