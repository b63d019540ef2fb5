package redact

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestHcloudCreateServerLogs creates a server with cloud-init user data
// through the real hcloud-go client against the fake API, logging at debug
// level: the logs show the traffic but neither the token, the user data
// nor the root password the answer carries.
func TestHcloudCreateServerLogs(t *testing.T) {
	const (
		token    = "hcloudscale-test-token-9f8e7d6c5b4a"
		joinLine = "kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef"
	)
	userData := "#cloud-config\nruncmd:\n  - " + joinLine + "\n"
	s := hcloudtest.NewServer(hcloudtest.WithToken(token), hcloudtest.WithDefaultActionDuration(0))
	t.Cleanup(s.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	core, logs := observer.New(zapcore.DebugLevel)
	client := s.Client(hcloud.WithHTTPClient(&http.Client{Transport: NewDebugTransport(tr, zap.New(core))}))

	res, _, err := client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
		Name:       "pool1-abc",
		ServerType: &hcloud.ServerType{Name: "cx23"},
		Image:      &hcloud.Image{Name: "ubuntu-24.04"},
		Location:   &hcloud.Location{Name: "fsn1"},
		UserData:   userData,
		Labels:     map[string]string{"hcloud/node-group": "pool1"},
	})
	if err != nil {
		t.Fatalf("Server.Create: %v", err)
	}
	if err := client.Action.WaitFor(t.Context(), res.Action); err != nil {
		t.Fatalf("waiting for create_server: %v", err)
	}
	if res.RootPassword == "" {
		t.Fatal("create without SSH keys answered no root password; the test needs one to look for")
	}
	if servers, _ := s.Servers(""); len(servers) != 1 || servers[0].UserData != userData {
		t.Fatalf("fake holds %+v; want one server with the user data sent unchanged", servers)
	}

	var all strings.Builder
	for _, e := range logs.All() {
		fmt.Fprintf(&all, "%s %v\n", e.Message, e.ContextMap())
	}
	text := all.String()
	for name, secret := range map[string]string{
		"token":         token,
		"join command":  joinLine,
		"join token":    "abcdef.0123456789abcdef",
		"cloud-config":  "#cloud-config",
		"root password": res.RootPassword,
	} {
		if strings.Contains(text, secret) {
			t.Errorf("logs contain the %s %q:\n%s", name, secret, text)
		}
	}
	for _, want := range []string{
		"api request map[body:{",
		`"user_data":"[redacted]"`,
		`"root_password":"[redacted]"`,
		"method:POST", "url:/v1/servers]",
		"method:GET", "url:/v1/actions",
		"status:201",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("logs lack %q:\n%s", want, text)
		}
	}
}
