package pool

import (
	"errors"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestDeleteInFlightHoldsItsSlot: a max-2 pool with two servers deletes
// one. While its delete action runs, the server has left the target (the
// autoscaler's view) but still exists: IncreaseSize(1) is refused, since
// the delete may fail. It fails, and the pool has 2 servers, not 3. Once a
// delete succeeds, the slot is free.
func TestDeleteInFlightHoldsItsSlot(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("delete_server", time.Minute)}})
	p := scaled(t, e, "workers", 0, 2, 2)
	e.fake.FailAction("delete_server", "server_error", "delete failed")
	victim := p.Instances()[0]
	if err := p.DeleteInstances(t.Context(), []string{victim.ID}); err != nil {
		t.Fatal(err)
	}
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() while deleting = %d; want 1", got)
	}
	if got := countStates(p.Instances()); got["deleting"] != 1 || got["running"] != 1 {
		t.Errorf("Instances() while deleting = %v; want 1 running, 1 deleting", got)
	}
	err := p.IncreaseSize(t.Context(), 1)
	if !errors.Is(err, ErrAboveMax) {
		t.Fatalf("IncreaseSize(1) while a delete is in flight = %v; want ErrAboveMax", err)
	}
	if err := p.AtomicIncreaseSize(t.Context(), 1); !errors.Is(err, ErrAboveMax) {
		t.Fatalf("AtomicIncreaseSize(1) while a delete is in flight = %v; want ErrAboveMax", err)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 2 {
		t.Fatalf("servers after the failed delete = %d; want 2", got)
	}
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() after the failed delete = %d; want 2", got)
	}

	// A delete that succeeds frees its slot once its action has.
	if err := p.DeleteInstances(t.Context(), []string{victim.ID}); err != nil {
		t.Fatal(err)
	}
	if err := p.IncreaseSize(t.Context(), 1); !errors.Is(err, ErrAboveMax) {
		t.Fatalf("IncreaseSize(1) while the second delete is in flight = %v; want ErrAboveMax", err)
	}
	e.settle(p)
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1) after the delete succeeded = %v; want nil", err)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 2 {
		t.Errorf("servers = %d; want 2", got)
	}
}

// TestMaxHoldsUnderDeletesAndScaleUps runs scale-ups, deletes of servers
// and of claims in flight, failing delete actions and listings
// concurrently on a max-3 pool, with the fake's time running on. The
// invariant: the servers that exist in the API (whatever their status) are
// never more than max, at any sample, and TargetSize never exceeds max.
func TestMaxHoldsUnderDeletesAndScaleUps(t *testing.T) {
	il := newInterleavings(t, 6, 20*time.Millisecond)
	intn, every := il.intn, il.every
	const maxSize = 3
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{
		hcloudtest.WithActionDuration("delete_server", time.Duration(1+intn(20))*time.Second),
		hcloudtest.WithActionDuration("create_server", time.Duration(1+intn(5))*time.Second),
	}})
	p := e.newPool(poolConfig("workers", 0, maxSize))
	ctx := t.Context()
	step := time.Duration(50+intn(500)) * time.Millisecond
	every(func() { e.clock.Step(step) })
	every(func() { _ = p.IncreaseSize(ctx, 1+intn(2)) })
	every(func() {
		if ins := p.Instances(); len(ins) > 0 {
			_ = p.DeleteInstances(ctx, []string{ins[intn(len(ins))].ID})
		}
	})
	every(func() {
		if intn(3) == 0 {
			e.fake.FailAction("delete_server", "server_error", "delete failed")
		}
	})
	every(func() { _, _ = e.cache.Refresh(ctx) })
	every(func() {
		if got := len(e.servers("workers")); got > maxSize {
			t.Errorf("%d servers exist; max is %d", got, maxSize)
		}
		if got := p.TargetSize(); got > maxSize {
			t.Errorf("TargetSize() = %d; max is %d", got, maxSize)
		}
	})
	time.Sleep(3 * time.Second)
	il.halt()
	e.settle(p)
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	servers := e.servers("workers")
	if len(servers) > maxSize {
		t.Errorf("%d servers at the end; max is %d", len(servers), maxSize)
	}
	live := 0
	for _, s := range servers {
		if s.Status != hcloud.ServerStatusDeleting {
			live++
		}
	}
	if got := p.TargetSize(); got != live {
		t.Errorf("TargetSize() = %d after settling; want the %d servers that exist", got, live)
	}
	if e.fake.Count("DELETE /servers/{id}") == 0 || e.fake.Count("POST /servers") == 0 {
		t.Errorf("the run sent %d creates and %d deletes; want both", e.fake.Count("POST /servers"), e.fake.Count("DELETE /servers/{id}"))
	}
}
