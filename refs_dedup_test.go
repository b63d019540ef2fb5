package hcloudscale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// bodyRecorder keeps the bodies of the create requests it passes on.
type bodyRecorder struct {
	mu     sync.Mutex // guards bodies
	bodies [][]byte
}

func (b *bodyRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/servers") && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		b.mu.Lock()
		b.bodies = append(b.bodies, body)
		b.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A firewall or SSH key written once by ID and once by name is one
// object: the create request carries it once.
func TestReferencesDeduplicatedByID(t *testing.T) {
	p := newProject(t)
	ctx := context.Background()
	fw, _, err := p.api.Client().Firewall.GetByName(ctx, "nodes")
	if err != nil || fw == nil {
		t.Fatalf("firewall nodes: %v, %v", fw, err)
	}
	key, _, err := p.api.Client().SSHKey.GetByName(ctx, "ops")
	if err != nil || key == nil {
		t.Fatalf("SSH key ops: %v, %v", key, err)
	}
	cc := healthyClusterConfig()
	nodeConfig(cc, "workers")["firewalls"] = []string{"nodes", "ingress"}
	cfg := p.load(t, cc, map[string]string{
		"HCLOUD_FIREWALL": itoa(fw.ID),
		"HCLOUD_SSH_KEY":  "ops," + itoa(key.ID),
	}, healthyNodes)
	rec := &bodyRecorder{}
	c := newCluster(t, cfg, hcloudscale.WithTransport(rec))
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.bodies)
		rec.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no create request")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var req struct {
		Firewalls []struct {
			Firewall int64 `json:"firewall"`
		} `json:"firewalls"`
		SSHKeys []json.RawMessage `json:"ssh_keys"`
		Labels  map[string]string `json:"labels"`
	}
	rec.mu.Lock()
	body := rec.bodies[0]
	rec.mu.Unlock()
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if req.Labels[config.LabelNodeGroup] != "workers" {
		t.Fatalf("create request of another pool: %s", body)
	}
	var fws []int64
	for _, f := range req.Firewalls {
		fws = append(fws, f.Firewall)
	}
	if len(fws) != 2 || fws[0] != fw.ID || fws[1] == fw.ID {
		t.Errorf("create request firewalls %v; want %d once, then ingress", fws, fw.ID)
	}
	if len(req.SSHKeys) != 1 {
		t.Errorf("create request SSH keys %s; want the one key once", req.SSHKeys)
	}
}
