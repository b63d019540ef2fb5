package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// scaled returns a pool with n running servers.
func scaled(t *testing.T, e *env, name string, minSize, maxSize, n int) *Pool {
	t.Helper()
	p := e.newPool(poolConfig(name, minSize, maxSize))
	if n > 0 {
		if err := p.IncreaseSize(t.Context(), n); err != nil {
			t.Fatalf("IncreaseSize(%d) error: %v", n, err)
		}
		e.settle(p)
	}
	if got := len(e.servers(name)); got != n {
		t.Fatalf("pool %s has %d servers; want %d", name, got, n)
	}
	return p
}

func TestDeleteInstancesRefusesForeignIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 2)
	other := scaled(t, e, "other", 0, 10, 1)
	own := p.Instances()
	foreign := other.Instances()[0]
	robot, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "unlabelled"})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		ids  []string
		want []string // every id the error must name
	}{
		{name: "server of another pool by provider ID", ids: []string{own[0].ID, foreign.ID}, want: []string{foreign.ID}},
		{name: "server of another pool by node name", ids: []string{foreign.Name}, want: []string{foreign.Name}},
		{name: "claim ID of another pool", ids: []string{ClaimID("other", "other-0000000000000000")}, want: []string{"hcloudscale://other/"}},
		{name: "server without pool label", ids: []string{"hcloud://" + itoa(robot)}, want: []string{"hcloud://" + itoa(robot)}},
		{name: "robot provider ID", ids: []string{"hrobot://123", "hcloud://bm-5"}, want: []string{"hrobot://123", "hcloud://bm-5"}},
		{name: "unknown node name", ids: []string{"nope", own[1].ID}, want: []string{`"nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.DeleteInstances(t.Context(), tt.ids)
			if err == nil {
				t.Fatalf("DeleteInstances(%v) = nil; want an error", tt.ids)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("DeleteInstances(%v) = %v; want it to name %s", tt.ids, err, w)
				}
			}
			if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
				t.Errorf("DELETE requests = %d; want none", got)
			}
			if got := p.TargetSize(); got != 2 {
				t.Errorf("TargetSize() = %d; want 2", got)
			}
		})
	}
}

func TestDeleteInstancesByEveryIDForm(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 3)
	ins := p.Instances()
	ids := []string{ins[0].ID, ins[1].Name, ins[1].ID /* duplicate */}

	if err := p.DeleteInstances(t.Context(), ids); err != nil {
		t.Fatalf("DeleteInstances(%v) error: %v", ids, err)
	}
	// The target drops at once; the servers count as deleting until their
	// delete actions finish.
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() right after DeleteInstances = %d; want 1", got)
	}
	if got, want := countStates(p.Instances()), map[string]int{"deleting": 2, "running": 1}; !cmp.Equal(got, want) {
		t.Errorf("Instances() right after DeleteInstances = %v; want %v", got, want)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 2 {
		t.Errorf("DELETE requests = %d; want 2", got)
	}
	// Deleting again while the deletes run is not an error and sends
	// nothing.
	if err := p.DeleteInstances(t.Context(), ids[:2]); err != nil {
		t.Errorf("repeated DeleteInstances error: %v", err)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 1 {
		t.Errorf("servers in the fake = %d; want 1", got)
	}
	if got, want := countStates(p.Instances()), map[string]int{"running": 1}; !cmp.Equal(got, want) {
		t.Errorf("Instances() after the deletes = %v; want %v", got, want)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 2 {
		t.Errorf("DELETE requests after the repeat = %d; want 2", got)
	}
	if got := e.fake.Count("GET /actions"); got == 0 {
		t.Error("no GET /actions: the delete actions were not awaited")
	}
}

func TestDeleteInstancesRespectsMinSize(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 2, 10, 3)
	ins := p.Instances()

	err := p.DeleteInstances(t.Context(), []string{ins[0].ID, ins[1].ID})
	if err == nil || !strings.Contains(err.Error(), "below the min size 2") {
		t.Fatalf("DeleteInstances of 2 of 3 at min 2 = %v; want a min-size error", err)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("DELETE requests = %d; want none", got)
	}
	if err := p.DeleteInstances(t.Context(), []string{ins[0].ID}); err != nil {
		t.Fatalf("DeleteInstances of 1 of 3 at min 2 error: %v", err)
	}
	if err := p.DeleteInstances(t.Context(), []string{ins[1].ID}); err == nil {
		t.Errorf("DeleteInstances at min = nil; want a min-size error")
	}
	if err := p.ForceDeleteInstances(t.Context(), []string{ins[1].ID}); err != nil {
		t.Errorf("ForceDeleteInstances at min error: %v", err)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 1 {
		t.Errorf("servers = %d; want 1", got)
	}
}

func TestPlaceholdersAreRemovableAtMin(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 2, 10, 2)
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "resource_limit_exceeded", Message: "server limit exceeded"})
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	var placeholder Instance
	for _, in := range p.Instances() {
		if in.Error != nil {
			placeholder = in
		}
	}
	if placeholder.Error == nil || placeholder.Error.Class != OutOfResources {
		t.Fatalf("no capacity placeholder in %+v", p.Instances())
	}
	requests := len(e.fake.Requests())
	// The autoscaler deletes failed instances through fake nodes named
	// after the instance ID, without a min-size cap.
	if err := p.DeleteInstances(t.Context(), []string{placeholder.ID}); err != nil {
		t.Fatalf("DeleteInstances(placeholder) at min error: %v", err)
	}
	if got := len(e.fake.Requests()); got != requests {
		t.Errorf("removing a placeholder made %d requests; want none", got-requests)
	}
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() = %d; want 2", got)
	}
	// Deleting it again, as the autoscaler does until it leaves Nodes,
	// is fine.
	if err := p.DeleteInstances(t.Context(), []string{placeholder.ID}); err != nil {
		t.Errorf("repeated DeleteInstances(placeholder) error: %v", err)
	}
}

func TestDeleteInstancesCancelsPendingClaims(t *testing.T) {
	t.Run("queued claim", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		// One create at a time: the second claim waits in the queue.
		p := e.newPool(poolConfig("workers", 0, 10), WithCreateConcurrency(1))
		e.fake.SetLatency(200 * time.Millisecond)
		if _, err := e.cache.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := p.IncreaseSize(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		var queued Instance
		e.eventually("one claim in flight and one queued", 0, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			queued = Instance{}
			sending := 0
			for _, c := range p.claims {
				switch c.phase {
				case claimQueued:
					queued = Instance{ID: ClaimID("workers", c.name), Name: c.name}
				case claimCreating:
					sending++
				}
			}
			return queued.ID != "" && sending == 1
		})
		if err := p.DeleteInstances(t.Context(), []string{queued.ID}); err != nil {
			t.Fatalf("DeleteInstances(queued claim) error: %v", err)
		}
		if got := p.TargetSize(); got != 1 {
			t.Errorf("TargetSize() = %d; want 1", got)
		}
		e.fake.SetLatency(0)
		e.settle(p)
		if got := e.servers("workers"); len(got) != 1 || got[0].Name == queued.Name {
			t.Errorf("servers = %+v; want one, not %s", got, queued.Name)
		}
		if got := e.fake.Count("POST /servers"); got != 1 {
			t.Errorf("POST /servers = %d; want 1: the deleted queued claim must not send its create", got)
		}
	})
	t.Run("create request in flight", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := e.newPool(poolConfig("workers", 0, 10))
		if _, err := e.cache.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.fake.SetLatency(300 * time.Millisecond)
		if err := p.IncreaseSize(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		var id string
		// The claim turns creating just before its request is sent; the
		// request is in flight once the fake holds it (in its latency).
		e.eventually("the create request to be sent", 0, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, c := range p.claims {
				if c.phase == claimCreating {
					id = ClaimID("workers", c.name)
				}
			}
			return id != "" && e.fake.ActiveRequests() > 0
		})
		if err := p.DeleteInstances(t.Context(), []string{id}); err != nil {
			t.Fatalf("DeleteInstances(claim in flight) error: %v", err)
		}
		if got := p.TargetSize(); got != 0 {
			t.Errorf("TargetSize() = %d; want 0", got)
		}
		if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"deleting": 1}) {
			t.Errorf("Instances() = %v; want the cancelled claim as deleting", got)
		}
		e.fake.SetLatency(0)
		e.settle(p)
		if got := e.servers("workers"); len(got) != 0 {
			t.Errorf("servers = %+v; want the server of the cancelled claim deleted", got)
		}
		if got := e.fake.Count("POST /servers"); got != 1 {
			t.Errorf("POST /servers = %d; want 1", got)
		}
		if got := len(p.Instances()); got != 0 {
			t.Errorf("Instances() has %d entries; want none", got)
		}
	})
	t.Run("server being created", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := e.newPool(poolConfig("workers", 0, 10))
		if err := p.IncreaseSize(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		e.eventually("the server", 0, func() bool { return len(e.servers("workers")) == 1 })
		s := e.servers("workers")[0]
		e.eventually("the claim to know its server", 0, func() bool {
			ins := p.Instances()
			return len(ins) == 1 && ins[0].ServerID == s.ID
		})
		if err := p.DeleteInstances(t.Context(), []string{"hcloud://" + itoa(s.ID)}); err != nil {
			t.Fatalf("DeleteInstances(server being created) error: %v", err)
		}
		if got := p.TargetSize(); got != 0 {
			t.Errorf("TargetSize() = %d; want 0", got)
		}
		e.settle(p)
		if got := e.servers("workers"); len(got) != 0 {
			t.Errorf("servers = %+v; want none", got)
		}
	})
}

func TestDeleteFailureKeepsServerCounted(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 2)
	ins := p.Instances()
	e.fake.FailRequest("DELETE /servers/{id}", 1, hcloudtest.RequestFault{Code: "locked", Message: "server is locked"})
	err := p.DeleteInstances(t.Context(), []string{ins[0].ID, ins[1].ID})
	if err == nil || !strings.Contains(err.Error(), "server is locked") {
		t.Fatalf("DeleteInstances = %v; want the locked error", err)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 1 {
		t.Errorf("servers = %d; want 1 (one delete failed)", got)
	}
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() = %d; want 1: the server whose delete failed counts again", got)
	}
	if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"running": 1}) {
		t.Errorf("Instances() = %v; want one running", got)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Hour)}})
	p := scaled(t, e, "workers", 0, 20, 0)
	if err := p.DecreaseTargetSize(t.Context(), 0); err == nil {
		t.Error("DecreaseTargetSize(0) = nil; want an error")
	}
	if err := p.DecreaseTargetSize(t.Context(), 1); err == nil {
		t.Error("DecreaseTargetSize(1) = nil; want an error")
	}

	// Three servers being created (their actions take an hour), two
	// claims still queued behind a create concurrency of 3. A flow holds
	// its slot only while its request is in flight, so the fake keeps the
	// three create requests for 2 s: far longer than the calls below take
	// on a loaded machine, and no slot frees up before the decrease.
	q := e.newPool(poolConfig("queue", 0, 20), WithCreateConcurrency(3))
	if _, err := e.cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.fake.SetLatency(2 * time.Second)
	if err := q.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	e.eventually("three create requests in flight", 0, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		n := 0
		for _, c := range q.claims {
			if c.phase == claimCreating {
				n++
			}
		}
		return n == 3
	})
	if err := q.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if got := q.TargetSize(); got != 5 {
		t.Fatalf("TargetSize() = %d; want 5", got)
	}
	// The autoscaler asks for more than is pending: only the two queued
	// claims go, the three servers stay, and the call succeeds.
	if err := q.DecreaseTargetSize(t.Context(), -4); err != nil {
		t.Fatalf("DecreaseTargetSize(-4) error: %v", err)
	}
	if got := q.TargetSize(); got != 3 {
		t.Errorf("TargetSize() after DecreaseTargetSize(-4) = %d; want 3 (the servers that exist)", got)
	}
	e.fake.SetLatency(0)
	e.eventually("the create requests", 0, func() bool {
		return countStates(q.Instances())["creating"] == 3 && e.fake.Count("POST /servers") == 3
	})
	if got := e.fake.Count("POST /servers"); got != 3 {
		t.Errorf("POST /servers = %d; want 3: removed claims must not create servers", got)
	}
	if err := q.DecreaseTargetSize(t.Context(), -1); err != nil {
		t.Errorf("DecreaseTargetSize(-1) with nothing removable error: %v", err)
	}
	if got := q.TargetSize(); got != 3 {
		t.Errorf("TargetSize() = %d; want 3", got)
	}
	e.clock.Step(time.Hour)
	e.settle(q)
	if got := len(e.servers("queue")); got != 3 {
		t.Errorf("servers = %d; want 3", got)
	}
}

func TestDecreaseTargetSizeRemovesPlaceholders(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 1)
	e.fake.FailAction("create_server", "server_error", "broken")
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	if got := p.TargetSize(); got != 2 {
		t.Fatalf("TargetSize() = %d; want 2 (server and placeholder)", got)
	}
	if err := p.DecreaseTargetSize(t.Context(), -2); err != nil {
		t.Fatalf("DecreaseTargetSize(-2) error: %v", err)
	}
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() = %d; want 1: the server stays", got)
	}
	if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"running": 1}) {
		t.Errorf("Instances() = %v; want the running server only", got)
	}
}

func TestAtomicIncreaseSize(t *testing.T) {
	t.Run("all succeed", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := e.newPool(poolConfig("workers", 0, 10))
		done := make(chan error, 1)
		go func() { done <- p.AtomicIncreaseSize(t.Context(), 4) }()
		var err error
		e.eventually("AtomicIncreaseSize", 100*time.Millisecond, func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		})
		if err != nil {
			t.Fatalf("AtomicIncreaseSize(4) error: %v", err)
		}
		servers := e.servers("workers")
		if len(servers) != 4 {
			t.Fatalf("servers = %d; want 4", len(servers))
		}
		for _, s := range servers {
			if s.Status != hcloud.ServerStatusRunning {
				t.Errorf("server %s is %s when AtomicIncreaseSize returned; want running", s.Name, s.Status)
			}
		}
	})
	t.Run("one fails: all rolled back", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := e.newPool(poolConfig("workers", 0, 10), WithCreateConcurrency(1))
		e.fake.FailRequest("POST /servers", 4, hcloudtest.RequestFault{Code: "resource_unavailable", Message: "sold out"})
		done := make(chan error, 1)
		go func() { done <- p.AtomicIncreaseSize(t.Context(), 5) }()
		var err error
		e.eventually("AtomicIncreaseSize", 100*time.Millisecond, func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		})
		var ce *ClaimError
		if !errors.As(err, &ce) || ce.Info.Class != OutOfResources || ce.Info.Code != "resource_unavailable" {
			t.Fatalf("AtomicIncreaseSize(5) = %v; want a ClaimError with the capacity class", err)
		}
		e.settle(p)
		if got := e.servers("workers"); len(got) != 0 {
			t.Errorf("servers after the roll-back = %+v; want none", got)
		}
		if got := p.Instances(); len(got) != 0 {
			t.Errorf("Instances() after the roll-back = %+v; want none (no placeholders)", got)
		}
		if got := p.TargetSize(); got != 0 {
			t.Errorf("TargetSize() = %d; want 0", got)
		}
	})
	t.Run("ctx ends first: all rolled back", func(t *testing.T) {
		e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Hour)}})
		p := e.newPool(poolConfig("workers", 0, 10))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.AtomicIncreaseSize(ctx, 3) }()
		var err error
		// The clock moves only for the roll-back's deletes; the creates
		// take an hour of it.
		e.eventually("AtomicIncreaseSize", 0, func() bool {
			select {
			case err = <-done:
				return true
			default:
				if ctx.Err() != nil {
					e.clock.Step(100 * time.Millisecond)
				}
				return false
			}
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AtomicIncreaseSize(3) = %v; want DeadlineExceeded", err)
		}
		e.settle(p)
		if got := e.servers("workers"); len(got) != 0 {
			t.Errorf("servers after the roll-back = %+v; want none", got)
		}
		if got := p.Instances(); len(got) != 0 {
			t.Errorf("Instances() after the roll-back = %+v; want none", got)
		}
	})
}

func TestCleanupRetriesTheDelete(t *testing.T) {
	tests := []struct {
		name        string
		failDeletes int
		wantLeft    int
	}{
		{name: "second delete works", failDeletes: 1, wantLeft: 0},
		// Every attempt fails: the server stays, still labelled, so the
		// next listing shows it and the autoscaler can remove it.
		{name: "every delete fails", failDeletes: defaultCleanupAttempts, wantLeft: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p := e.newPool(poolConfig("workers", 0, 10))
			e.fake.FailAction("start_server", "server_error", "broken")
			for range tt.failDeletes {
				e.fake.FailRequest("DELETE /servers/{id}", 1, hcloudtest.RequestFault{Code: "service_error"})
			}
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			e.settle(p)
			if got := len(e.servers("workers")); got != tt.wantLeft {
				t.Errorf("servers left = %d; want %d", got, tt.wantLeft)
			}
			if got, want := e.fake.Count("DELETE /servers/{id}"), min(tt.failDeletes+1, defaultCleanupAttempts); got != want {
				t.Errorf("DELETE requests = %d; want %d", got, want)
			}
			if got := countStates(p.Instances()); got["creating/Other/server_error"] != 1 {
				t.Errorf("Instances() = %v; want the placeholder", got)
			}
		})
	}
}

func TestFailedDeleteActionCountsAgain(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 2)
	e.fake.FailAction("delete_server", "server_error", "stuck")
	ins := p.Instances()
	if err := p.DeleteInstances(t.Context(), []string{ins[0].ID}); err != nil {
		t.Fatal(err)
	}
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() while deleting = %d; want 1", got)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 2 {
		t.Errorf("servers = %d; want 2 (the delete action failed)", got)
	}
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() after the failed delete = %d; want 2", got)
	}
}

func TestSharedOfferingsStopOtherPools(t *testing.T) {
	e := newEnv(t, envOptions{})
	shared, err := NewOfferings(e.clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := e.newPool(poolConfig("a", 0, 10), WithOfferings(shared))
	b := e.newPool(poolConfig("b", 0, 10), WithOfferings(shared))
	elsewhere := poolConfig("c", 0, 10)
	elsewhere.Location = "nbg1"
	c := e.newPool(elsewhere, WithOfferings(shared))
	e.fake.SetUnavailable("cx23", "fsn1", true)
	if err := a.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(a)
	if err := b.IncreaseSize(t.Context(), 1); !errors.Is(err, ErrOfferingUnavailable) {
		t.Errorf("pool b (same type and location) IncreaseSize = %v; want ErrOfferingUnavailable", err)
	}
	if err := c.IncreaseSize(t.Context(), 1); err != nil {
		t.Errorf("pool c (other location) IncreaseSize = %v; want nil", err)
	}
	e.settle(c)
	if got := len(e.servers("c")); got != 1 {
		t.Errorf("pool c servers = %d; want 1", got)
	}
}

func TestDeleteRequestFailingOnTheWay(t *testing.T) {
	tests := []struct {
		name        string
		afterEffect bool
		deletes     int
	}{
		{name: "response lost: the server is being deleted", afterEffect: true, deletes: 1},
		{name: "request lost: sent again", afterEffect: false, deletes: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p := scaled(t, e, "workers", 0, 10, 2)
			ins := p.Instances()
			e.fake.DropConnection("DELETE /servers/{id}", 1, tt.afterEffect)
			if err := p.DeleteInstances(t.Context(), []string{ins[0].ID}); err != nil {
				t.Fatalf("DeleteInstances error: %v", err)
			}
			if got := p.TargetSize(); got != 1 {
				t.Errorf("TargetSize() = %d; want 1", got)
			}
			e.settle(p)
			e.eventually("the delete to finish in the fake", 100*time.Millisecond, func() bool { return len(e.servers("workers")) == 1 })
			if got := e.fake.Count("DELETE /servers/{id}"); got != tt.deletes {
				t.Errorf("DELETE requests = %d; want %d", got, tt.deletes)
			}
			if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"running": 1}) {
				t.Errorf("Instances() = %v; want one running", got)
			}
		})
	}
}

// TestVanishedDeleteActionConcernsItsServerOnly deletes three servers in
// one call; the delete action of one vanishes from the API while the
// others finish. Only that server counts again: the others are deleted
// and forgotten.
func TestVanishedDeleteActionConcernsItsServerOnly(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 10, 3)
	ins := p.Instances()
	var all []string
	for _, in := range ins {
		all = append(all, in.ID)
	}
	if err := p.DeleteInstances(t.Context(), all); err != nil {
		t.Fatal(err)
	}
	// The clock stands still: the delete actions run.
	if n := e.fake.ForgetActions(ins[0].ServerID); n == 0 {
		t.Fatalf("ForgetActions(%d) removed nothing", ins[0].ServerID)
	}
	e.settle(p)
	servers := e.servers("workers")
	if len(servers) != 1 || servers[0].ID != ins[0].ServerID {
		t.Fatalf("fake holds %+v; want only server %d", servers, ins[0].ServerID)
	}
	got := p.Instances()
	if len(got) != 1 || got[0].ServerID != ins[0].ServerID || got[0].State != Running {
		t.Errorf("Instances() = %+v; want server %d running again, the others gone", got, ins[0].ServerID)
	}
	if n := p.TargetSize(); n != 1 {
		t.Errorf("TargetSize() = %d; want 1", n)
	}
}
