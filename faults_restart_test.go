package hcloudscale_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale"
)

// restartStep is a point of a create flow at which the process running it
// stops (or, with keepOld, a second process starts beside it).
type restartStep struct {
	name string
	pool string
	// setup injects faults before the scale-up.
	setup func(e *faultEnv)
	// reached reports that the first process got to the step; the manual
	// clock stands still meanwhile, so the step's action keeps running.
	reached func(e *faultEnv, n int) bool
	// advance moves the clock between the stop and the start, so that
	// the API finishes what runs while no process watches; zero: the new
	// process finds the action running.
	advance time.Duration
	// frozen keeps the clock still until the step is reached (actions
	// do not finish), else it moves in small steps.
	frozen bool
	// keepOld leaves the first process running: two processes finish
	// the same flows for a while, as during a rolling restart.
	keepOld bool
}

func serversExist(pool string) func(e *faultEnv, n int) bool {
	return func(e *faultEnv, n int) bool { return len(poolServers(e.t, e.api(), pool)) >= n }
}

func requestsSent(template string) func(e *faultEnv, n int) bool {
	return func(e *faultEnv, n int) bool { return e.api().Count(template) >= n }
}

// loseFirstCreateResponse makes the API create the first server and drop
// the response: the flow sends the request again, gets uniqueness_error
// and adopts the server.
func loseFirstCreateResponse(e *faultEnv) { e.api().DropConnection("POST /servers", 1, true) }

// restartSteps are the steps of every create-flow variant: a plain pool
// (start_after_create), a subnet pool (created stopped, attached with the
// range, powered on), and a server adopted after a lost create response
// in each.
func restartSteps() []restartStep {
	const attach = "POST /servers/{id}/actions/attach_to_network"
	const poweron = "POST /servers/{id}/actions/poweron"
	var steps []restartStep
	for _, poolName := range []string{"plain", "subnet"} {
		steps = append(steps,
			restartStep{name: poolName + ": create sent", pool: poolName, reached: serversExist(poolName)},
			restartStep{name: poolName + ": create finished while stopped", pool: poolName, reached: serversExist(poolName), advance: time.Minute},
			restartStep{name: poolName + ": create sent, old process keeps running", pool: poolName, reached: serversExist(poolName), keepOld: true},
			restartStep{name: poolName + " adopted: response lost", pool: poolName, setup: loseFirstCreateResponse,
				reached: requestsSent("POST /servers")},
			restartStep{name: poolName + " adopted: waiting for the adopted server", pool: poolName, setup: loseFirstCreateResponse,
				reached: func(e *faultEnv, n int) bool { return e.api().Count("GET /servers/{id}") >= 1 }, frozen: true},
		)
	}
	steps = append(steps,
		restartStep{name: "subnet: attach sent", pool: "subnet", reached: requestsSent(attach)},
		restartStep{name: "subnet: attach finished while stopped", pool: "subnet", reached: requestsSent(attach), advance: time.Minute},
		restartStep{name: "subnet: attach sent, old process keeps running", pool: "subnet", reached: requestsSent(attach), keepOld: true},
		restartStep{name: "subnet: power-on sent", pool: "subnet", reached: requestsSent(poweron)},
		restartStep{name: "subnet: power-on finished while stopped", pool: "subnet", reached: requestsSent(poweron), advance: time.Minute},
		restartStep{name: "subnet: power-on sent, old process keeps running", pool: "subnet", reached: requestsSent(poweron), keepOld: true},
		restartStep{name: "subnet adopted: attach sent", pool: "subnet", setup: loseFirstCreateResponse, reached: requestsSent(attach)},
	)
	return steps
}

// TestFaultRestartAtEveryStep stops the process at every step of every
// create-flow variant and starts a new one over the same project (or, with
// keepOld, beside the old one). After each: no server is deleted, none is
// duplicated or leaked, the scale-up completes (every server runs and is
// reported running without waiting for a listing), the target is
// consistent, and a scale-down removes everything.
func TestFaultRestartAtEveryStep(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Run("steps", func(t *testing.T) {
		for _, step := range restartSteps() {
			t.Run(step.name, func(t *testing.T) {
				t.Parallel()
				runRestartStep(t, step)
			})
		}
	})
	checkNoLeaks(t, ignore)
}

func runRestartStep(t *testing.T, step restartStep) {
	const n = 2
	e := newFaultEnv(t, faultOptions{cluster: []hcloudscale.Option{hcloudscale.WithListTTL(time.Hour)}})
	defer e.stop()
	ctx := context.Background()
	if step.setup != nil {
		step.setup(e)
	}
	if err := e.c.Pool(step.pool).IncreaseSize(ctx, n); err != nil {
		t.Fatal(err)
	}
	if step.frozen {
		e.waitFor(step.name, func() bool { return step.reached(e, n) })
	} else {
		advanceUntil(e, step.name, func() bool { return step.reached(e, n) })
	}

	old := e.c
	if !step.keepOld {
		killed, cancel := context.WithCancel(ctx)
		cancel()
		_ = old.Close(killed) // a cancelled Close reports the flows it stopped
		e.killed[old] = true
	}
	e.clock.Advance(step.advance)
	e.c = e.start()

	if err := e.settle(); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if step.keepOld {
		advanceUntil(e, "the old process's flows", func() bool { return old.Pool(step.pool).Status().PendingClaims == 0 })
		if st := old.Pool(step.pool).Status(); st.Running != n || st.Failed != 0 || st.Target != n {
			t.Errorf("old process: Status() = %+v; want %d running, no failure", st, n)
		}
	}
	v := observe(t, e.c, e.api())
	checkInvariants(t, v, nil)
	servers := poolServers(t, e.api(), step.pool)
	if len(servers) != n {
		t.Errorf("the API holds %d servers of pool %s; want %d (no duplicate, none lost)\n%v", len(servers), step.pool, n, v)
	}
	for _, s := range servers {
		if s.Status != hcloud.ServerStatusRunning {
			t.Errorf("server %s is %s; want running\n%v", s.Name, s.Status, v)
		}
		if step.pool == "subnet" && len(s.Networks) != 1 {
			t.Errorf("server %s is attached to networks %v; want the pool's, once", s.Name, s.Networks)
		}
	}
	if got := e.api().Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("%d delete requests during the scale-up; want none\n%v", got, v)
	}
	p := e.c.Pool(step.pool)
	if st := p.Status(); st.Running != n || st.Target != n {
		t.Errorf("Status() = %+v; want %d running, target %d", st, n, n)
	}
	// One listing per process start: the servers were reported running
	// by the flows that saw them run, not by a listing.
	listings := 0
	for _, r := range e.api().Requests() {
		if r.Template == "GET /servers" && r.Query.Get("label_selector") != "" {
			listings++
		}
	}
	if listings != 2 {
		t.Errorf("%d server listings; want 2 (one per process start)", listings)
	}

	if err := p.DeleteInstances(ctx, ids(p)); err != nil {
		t.Fatalf("DeleteInstances: %v", err)
	}
	if err := e.settle(); err != nil {
		t.Fatalf("after the scale-down: %v", err)
	}
	checkInvariants(t, observe(t, e.c, e.api()), nil)
	if got := len(poolServers(t, e.api(), step.pool)); got != 0 {
		t.Errorf("after the scale-down the API holds %d servers; want 0", got)
	}
	if step.keepOld {
		closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := old.Close(closeCtx); err != nil {
			t.Errorf("closing the old process: %v", err)
		}
		e.killed[old] = true
	}
}

// advanceUntil moves the manual clock by 10 ms per millisecond of wall
// time until cond holds: actions advance one by one, so a test can stop
// between two steps of a flow.
func advanceUntil(e *faultEnv, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		e.clock.Advance(10 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
}

// TestWithoutResumeLeavesFlowsAlone checks that a Cluster built for
// inspection (status, validate) does not act on the create flows another
// process is finishing.
func TestWithoutResumeLeavesFlowsAlone(t *testing.T) {
	e := newFaultEnv(t, faultOptions{})
	defer e.stop()
	ctx := context.Background()
	if err := e.c.Pool("subnet").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	advanceUntil(e, "the create request", func() bool { return len(poolServers(t, e.api(), "subnet")) == 1 })
	killed, cancel := context.WithCancel(ctx)
	cancel()
	_ = e.c.Close(killed)
	e.killed[e.c] = true
	e.clock.Advance(time.Minute) // the server is created, off, not attached

	e.opts = append(e.opts, hcloudscale.WithoutResume())
	e.c = e.start()
	if err := e.c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := e.api().Count("POST /servers/{id}/actions/attach_to_network") + e.api().Count("POST /servers/{id}/actions/poweron"); n != 0 {
		t.Errorf("%d attach or power-on requests; want none", n)
	}
	if st := e.c.Pool("subnet").Status(); st.PendingClaims != 0 {
		t.Errorf("Status() = %+v; want no flow", st)
	}
}

// TestResumeWhenLeading checks WithResumeWhen: a standby replica leaves the
// create flow a previous leader left unfinished alone, through New and
// every Refresh; once it leads, Resume finishes the flow.
func TestResumeWhenLeading(t *testing.T) {
	e := newFaultEnv(t, faultOptions{})
	defer e.stop()
	ctx := context.Background()
	if err := e.c.Pool("subnet").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	advanceUntil(e, "the create request", func() bool { return len(poolServers(t, e.api(), "subnet")) == 1 })
	killed, cancel := context.WithCancel(ctx)
	cancel()
	_ = e.c.Close(killed)
	e.killed[e.c] = true
	e.clock.Advance(time.Minute) // the server is created, off, not attached

	var leads atomic.Bool
	e.opts = append(e.opts, hcloudscale.WithResumeWhen(leads.Load))
	e.c = e.start()
	for range 3 {
		e.clock.Advance(2 * time.Minute) // past the listing's TTL
		if err := e.c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	actions := func() int {
		return e.api().Count("POST /servers/{id}/actions/attach_to_network") + e.api().Count("POST /servers/{id}/actions/poweron")
	}
	if n := actions(); n != 0 {
		t.Fatalf("standby: %d attach or power-on requests; want none", n)
	}

	leads.Store(true)
	if err := e.c.RefreshNow(ctx); err != nil {
		t.Fatal(err)
	}
	e.c.Resume()
	advanceUntil(e, "the resumed flow", func() bool { return e.c.Pool("subnet").Status().Running == 1 })
	if n := actions(); n != 2 {
		t.Errorf("leader: %d attach and power-on requests; want 2 (one of each)", n)
	}
}
