package externalgrpc_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// switchGate lets changes in while open is set and counts the calls
// inside.
type switchGate struct {
	mu     sync.Mutex
	open   bool
	inside int
	max    int // most calls inside at once
}

func (g *switchGate) Enter() (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return nil, errors.New("not the leader")
	}
	g.inside++
	g.max = max(g.max, g.inside)
	return func() {
		g.mu.Lock()
		g.inside--
		g.mu.Unlock()
	}, nil
}

func (g *switchGate) set(open bool) {
	g.mu.Lock()
	g.open = open
	g.mu.Unlock()
}

// TestGate checks that a closed gate refuses every change with
// Unavailable and changes nothing, answers reads, and that an open gate
// lets the same calls through and sees each of them leave.
func TestGate(t *testing.T) {
	gate := &switchGate{}
	e := newEnv(t, envOptions{gate: gate})

	refused := []struct {
		name string
		call func() error
	}{
		{"Refresh", func() error { _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); return err }},
		{"NodeGroupIncreaseSize", func() error {
			_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2})
			return err
		}},
		{"NodeGroupDecreaseTargetSize", func() error {
			_, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: -1})
			return err
		}},
		{"NodeGroupDeleteNodes", func() error {
			_, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "arm",
				Nodes: []*protos.ExternalGrpcNode{{ProviderID: fmt.Sprintf("hcloud://%d", e.armServer)}}})
			return err
		}},
	}
	for _, c := range refused {
		if err := c.call(); status.Code(err) != codes.Unavailable {
			t.Errorf("%s behind a closed gate: %v; want Unavailable", c.name, err)
		}
	}
	// Ungated, the delete would be FailedPrecondition (the arm pool's min
	// size is 1): Unavailable above shows the gate answered first.
	if got := e.targetSize("workers"); got != 0 {
		t.Errorf("workers target after refused calls = %d; want 0", got)
	}
	if got := len(e.servers("arm")); got != 1 {
		t.Errorf("arm servers after a refused delete = %d; want 1", got)
	}
	if got := len(e.servers("workers")); got != 0 {
		t.Errorf("workers servers after a refused scale-up = %d; want 0", got)
	}
	// Reads are answered from this replica's listing.
	groups, err := e.client.NodeGroups(e.ctx(), &protos.NodeGroupsRequest{})
	if err != nil || len(groups.GetNodeGroups()) != 3 {
		t.Errorf("NodeGroups behind a closed gate = %v, %v; want the three groups", groups.GetNodeGroups(), err)
	}
	if got := len(e.nodes("arm")); got != 1 {
		t.Errorf("NodeGroupNodes(arm) behind a closed gate = %d instances; want 1", got)
	}

	gate.set(true)
	if _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Errorf("Refresh behind an open gate: %v", err)
	}
	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize behind an open gate: %v", err)
	}
	if _, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: -1}); err != nil {
		t.Errorf("NodeGroupDecreaseTargetSize behind an open gate: %v", err)
	}
	if got := e.targetSize("workers"); got < 1 || got > 2 {
		t.Errorf("workers target after +2 -1 = %d; want 1 (or 2 if both creates were sent)", got)
	}
	gate.mu.Lock()
	inside, most := gate.inside, gate.max
	gate.mu.Unlock()
	if inside != 0 || most != 1 {
		t.Errorf("gate: %d calls inside after they returned, at most %d at once; want 0 and 1", inside, most)
	}
}
