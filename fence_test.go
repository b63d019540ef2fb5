package hcloudscale_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// switchFence lets writes through while open; it counts what it was asked.
type switchFence struct {
	mu      sync.Mutex
	open    bool
	allowed int // writes let through
	refused int
	// closeAfter, when positive, closes the fence after that many writes.
	closeAfter int
}

var errClosedFence = errors.New("fence closed")

func (f *switchFence) AllowWrite() (hcloudscale.Permit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open {
		f.refused++
		return hcloudscale.Permit{}, errClosedFence
	}
	f.allowed++
	if f.closeAfter > 0 && f.allowed >= f.closeAfter {
		f.open = false
	}
	return hcloudscale.Permit{}, nil
}

func (f *switchFence) counts() (allowed, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allowed, f.refused
}

func apiWrites(api *hcloudtest.Server) int {
	n := 0
	for _, r := range api.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			n++
		}
	}
	return n
}

// TestFenceRefusesEveryWrite: with the fence closed, a scale-up sends no
// request that changes servers, not even a retry, and its claims go away
// without failed placeholders (nothing was sent, so the autoscaler has
// nothing to delete). Reads go on.
func TestFenceRefusesEveryWrite(t *testing.T) {
	fence := &switchFence{}
	e := newFaultEnv(t, faultOptions{realClock: true, cluster: []hcloudscale.Option{hcloudscale.WithFence(fence)}})
	p := e.c.Pool("plain")
	if err := p.IncreaseSize(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the claims to go", func() bool { return p.Status().PendingClaims == 0 && len(p.Instances()) == 0 })
	if n := apiWrites(e.api()); n != 0 {
		t.Errorf("%d requests that change servers reached the API; want 0", n)
	}
	if allowed, refused := fence.counts(); allowed != 0 || refused != 3 {
		t.Errorf("fence: %d allowed, %d refused; want 0 and 3 (one per claim, no retry)", allowed, refused)
	}
	if err := e.c.Refresh(context.Background()); err != nil {
		t.Errorf("Refresh (a read) with the fence closed: %v", err)
	}
}

// TestFenceStopsFlowAndNextLeaderResumes: a subnet pool's flow creates its
// server stopped, then attaches and powers it on. The fence closes right
// after the create request, as when the Lease is handed over: the flow
// stops there, deletes nothing, and a Cluster with an open fence (the
// next leader) finishes the server.
func TestFenceStopsFlowAndNextLeaderResumes(t *testing.T) {
	fence := &switchFence{open: true, closeAfter: 1}
	e := newFaultEnv(t, faultOptions{realClock: true, cluster: []hcloudscale.Option{hcloudscale.WithFence(fence)}})
	p := e.c.Pool("subnet")
	if err := p.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the flow to stop", func() bool { return p.Status().PendingClaims == 0 })
	servers := poolServers(t, e.api(), "subnet")
	if len(servers) != 1 || servers[0].Status != hcloud.ServerStatusOff {
		t.Fatalf("after the fence closed: %+v; want one server, off", servers)
	}
	if n := apiWrites(e.api()); n != 1 {
		t.Fatalf("%d requests that change servers; want only the create", n)
	}
	for _, in := range p.Instances() {
		if in.Error != nil {
			t.Errorf("instance %s reported with error %+v; the flow was stopped, not failed", in.ID, in.Error)
		}
	}

	// The next leader.
	fence.mu.Lock()
	fence.open, fence.closeAfter = true, 0
	fence.mu.Unlock()
	e.restart()
	e.waitFor("the resumed server to run", func() bool {
		s := poolServers(t, e.api(), "subnet")
		return len(s) == 1 && s[0].Status == hcloud.ServerStatusRunning
	})
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	if got := poolServers(t, e.api(), "subnet"); len(got) != 1 || got[0].ID != servers[0].ID {
		t.Errorf("servers after the resume: %+v; want the one server", got)
	}
	if n := e.api().Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d deletes; want none", n)
	}
}
