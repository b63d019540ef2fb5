package pool

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// actionsDown fails every GET /actions, with 5xx and 429 in turn, while
// every other request gets through.
func (e *env) actionsDown() {
	e.fake.SetEndpointOutage("GET /actions",
		hcloudtest.RequestFault{Code: "server_error"},
		hcloudtest.RequestFault{Code: "rate_limit_exceeded", Status: http.StatusTooManyRequests},
		hcloudtest.RequestFault{Status: http.StatusBadGateway},
	)
}

// TestFailedCreateFlowKeepsWhatRan fails create flows by an outage of
// GET /actions that lasts their creation timeout, while creates, look-ups
// and deletes get through, with the server at the flow's end in each
// state a create can leave it. A server that runs, ran or may have run is
// kept and reported running, without error, in place of its claim; only
// one that provably never ran is deleted (the delete awaited once the
// outage ends), and leaves a placeholder.
func TestFailedCreateFlowKeepsWhatRan(t *testing.T) {
	running := func(s hcloudtest.ServerInfo) bool { return s.Status == hcloud.ServerStatusRunning }
	tests := []struct {
		name       string
		subnet     bool
		failStart  bool                             // the create's start_server action fails
		slowCreate bool                             // create_server takes an hour
		until      func(hcloudtest.ServerInfo) bool // the server's state before then runs
		then       func(*env, int64)                // what happens to the server before the flow ends
		kept       bool
		want       hcloud.ServerStatus
	}{
		{name: "running all along", until: running, kept: true, want: hcloud.ServerStatusRunning},
		{name: "shut down after it ran", until: running, then: func(e *env, id int64) {
			if _, _, err := e.client.Server.Poweroff(e.t.Context(), &hcloud.Server{ID: id}); err != nil {
				e.t.Fatal(err)
			}
			e.eventually("the server to be off", 100*time.Millisecond, func() bool {
				s, _ := e.fake.ServerByID(id)
				return s.Status == hcloud.ServerStatusOff
			})
		}, kept: true, want: hcloud.ServerStatusOff},
		{name: "reset after it ran: starting", until: running, then: func(e *env, id int64) {
			if err := e.fake.SetServerStatus(id, hcloud.ServerStatusStarting); err != nil {
				e.t.Fatal(err)
			}
			// The flow waits for the start to end; it does once the
			// flow has looked.
			e.eventually("the flow's look-up", 100*time.Millisecond, func() bool {
				return e.fake.Count("GET /servers/{id}") > 0 || e.fake.Count("DELETE /servers/{id}") > 0
			})
			if err := e.fake.SetServerStatus(id, hcloud.ServerStatusRunning); err != nil {
				e.t.Fatal(err)
			}
		}, kept: true, want: hcloud.ServerStatusRunning},
		{name: "its start failed: off, never ran", failStart: true},
		{name: "subnet: created stopped, never started", subnet: true},
		{name: "still initializing", slowCreate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fopts []hcloudtest.Option
			if tc.slowCreate {
				fopts = append(fopts, hcloudtest.WithActionDuration("create_server", time.Hour))
			}
			e := newEnv(t, envOptions{fake: fopts})
			cfg := poolConfig("workers", 1, 5)
			if tc.subnet {
				e.addReferences()
				cfg = subnetPoolConfig("workers")
			}
			p := e.newPool(cfg, WithCreationTimeout(2*time.Second))
			if tc.failStart {
				e.fake.FailAction("start_server", "", "")
			}
			e.actionsDown()
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			e.eventually("the server to exist", 100*time.Millisecond, func() bool { return len(e.servers("workers")) == 1 })
			id := e.servers("workers")[0].ID
			if tc.until != nil {
				e.eventually("the server's state", 100*time.Millisecond, func() bool {
					s, _ := e.fake.ServerByID(id)
					return tc.until(s)
				})
			}
			if tc.then != nil {
				tc.then(e, id)
			}
			// The flow ends, or deletes the server; a delete is awaited
			// once the actions can be read again.
			e.eventually("the flow to end or delete", 100*time.Millisecond, func() bool {
				return settled(p) || e.fake.Count("DELETE /servers/{id}") > 0
			})
			if e.fake.Count("DELETE /servers/{id}") > 0 {
				e.fake.SetEndpointOutage("GET /actions")
				if tc.kept {
					t.Fatalf("the failed flow deleted server %d, which ran", id)
				}
			}
			e.settle(p)

			ins := p.Instances()
			if !tc.kept {
				if got := e.servers("workers"); len(got) != 0 {
					t.Errorf("servers left: %+v; want none: it never ran", got)
				}
				if len(ins) != 1 || ins[0].Error == nil || ins[0].ServerID != 0 {
					t.Errorf("Instances() = %+v; want one placeholder", ins)
				}
				return
			}
			s, ok := e.fake.ServerByID(id)
			if !ok || s.Status != tc.want {
				t.Fatalf("server %d: %+v, exists %t; want it kept, %s", id, s, ok, tc.want)
			}
			if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
				t.Errorf("DELETE /servers/{id} = %d; want none", got)
			}
			if len(ins) != 1 || ins[0].ServerID != id || ins[0].State != Running || ins[0].Error != nil {
				t.Errorf("Instances() = %+v; want server %d Running without error", ins, id)
			}
			if st := p.Status(); st.Target != 1 || st.PendingClaims != 0 || st.Failed != 0 {
				t.Errorf("Status() = %+v; want target 1, no claim, nothing failed", st)
			}
			// A kept server is no unfinished create: Resume leaves it.
			e.fake.SetEndpointOutage("GET /actions")
			if _, err := e.cache.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := p.Resume(); got != 0 {
				t.Errorf("Resume() = %d after the flow kept the server; want 0", got)
			}
			// Min size holds for it: the autoscaler's scale-down cannot
			// take the pool below 1.
			if err := p.DeleteInstances(t.Context(), []string{ins[0].ID}); err == nil {
				t.Error("DeleteInstances of the kept server at min size succeeded; want it refused")
			}
		})
	}
}

// TestFlowEndRuleUnderRandomInterleavings runs create flows of a plain and
// a subnet pool through a random mix, seeded and logged, of what the API
// and people do meanwhile: GET /actions down and up again, create and
// start actions slow or failing, nodes shut down or reset once they ran,
// the autoscaler deleting instances, restarts' Resume; with random
// creation timeouts, so that flows end at every step. Run it with -race
// and -count.
//
// The invariant, for every flow however it ends:
//   - a server that a flow deletes had not run when the flow last looked
//     it up before the delete (no start_server or poweron had succeeded):
//     no flow deletes a server that ran;
//   - once everything settled, every server left had run: a failed flow
//     leaks no server that never ran (look-ups answer in this test);
//   - each pool's target counts every server left once, plus its
//     placeholders, and no server carries error info.
func TestFlowEndRuleUnderRandomInterleavings(t *testing.T) {
	il := newInterleavings(t, 27, 30*time.Millisecond)
	intn, every, stop := il.intn, il.every, il.stop
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(intn(int(hi-lo))) }

	e := newEnv(t, envOptions{fake: []hcloudtest.Option{
		hcloudtest.WithActionDuration("create_server", dur(200*time.Millisecond, 3*time.Second)),
		hcloudtest.WithActionDuration("start_server", dur(100*time.Millisecond, 2*time.Second)),
	}})
	e.addReferences()
	pools := []*Pool{
		e.newPool(poolConfig("plain", 0, 20), WithCreationTimeout(dur(100*time.Millisecond, 800*time.Millisecond))),
		e.newPool(subnetPoolConfig("subnet"), WithCreationTimeout(dur(100*time.Millisecond, 800*time.Millisecond))),
	}
	for _, p := range pools {
		cfg := p.Config()
		cfg.MaxSize = 20
		if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()

	var mu sync.Mutex // guards deletedByUs and resetting
	deletedByUs := map[int64]bool{}
	step := dur(5*time.Millisecond, 60*time.Millisecond)
	il.wg.Go(func() { // the fake's time runs 5 to 60 times as fast as the wall's
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				e.clock.Step(step)
			}
		}
	})
	il.wg.Go(func() { // GET /actions down and up again, for short and long spells
		longest := dur(20*time.Millisecond, 800*time.Millisecond)
		for down := intn(2) == 0; ; down = !down {
			if down {
				e.actionsDown()
			} else {
				e.fake.SetEndpointOutage("GET /actions")
			}
			select {
			case <-stop:
				return
			case <-time.After(dur(time.Millisecond, longest)):
			}
		}
	})
	every(func() { // slow or failing creates and starts
		switch intn(20) {
		case 0:
			e.fake.FailAction("start_server", "", "")
		case 1:
			e.fake.FailAction("create_server", "", "")
		case 2:
			e.fake.SetActionDuration("create_server", dur(100*time.Millisecond, 20*time.Second))
		}
	})
	resetting := map[int64]bool{} // guarded by mu
	endResets := func() {
		mu.Lock()
		defer mu.Unlock()
		for id := range resetting {
			if s, ok := e.fake.ServerByID(id); ok && s.Status == hcloud.ServerStatusStarting {
				_ = e.fake.SetServerStatus(id, hcloud.ServerStatusRunning)
			}
			delete(resetting, id)
		}
	}
	every(func() { // a person shuts a node down or resets it once it ran
		servers, _ := e.fake.Servers("")
		for _, s := range servers {
			if s.Status != hcloud.ServerStatusRunning || intn(40) != 0 {
				continue
			}
			if intn(2) == 0 {
				_, _, _ = e.client.Server.Poweroff(ctx, &hcloud.Server{ID: s.ID})
				continue
			}
			mu.Lock()
			resetting[s.ID] = true
			mu.Unlock()
			_ = e.fake.SetServerStatus(s.ID, hcloud.ServerStatusStarting)
		}
		if intn(10) == 0 {
			endResets()
		}
	})
	every(func() { // the autoscaler scales up, deletes instances, refreshes
		p := pools[intn(len(pools))]
		switch intn(12) {
		case 0, 1:
			_ = p.IncreaseSize(ctx, 1+intn(3))
		case 2:
			for _, in := range p.Instances() {
				if in.ServerID != 0 && intn(4) == 0 {
					mu.Lock()
					deletedByUs[in.ServerID] = true
					mu.Unlock()
					_ = p.DeleteInstances(ctx, []string{in.ID})
				}
			}
		case 3:
			if _, err := e.cache.Refresh(ctx); err == nil {
				p.Resume()
			}
		}
	})
	time.Sleep(dur(500*time.Millisecond, 1500*time.Millisecond))
	il.halt()
	endResets()

	e.fake.SetEndpointOutage("GET /actions")
	e.eventually("the pools to settle", 100*time.Millisecond, func() bool { return settled(pools[0]) && settled(pools[1]) })
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		p.Resume()
	}
	e.eventually("the resumed flows to settle", 100*time.Millisecond, func() bool { return settled(pools[0]) && settled(pools[1]) })

	// When each server first ran: the successful start_server and
	// poweron actions of the whole project, read by ID.
	ran := map[int64]time.Time{}
	for first := int64(1_000_001); ; first += 50 {
		ids := make([]int64, 50)
		for i := range ids {
			ids[i] = first + int64(i)
		}
		actions, _, err := e.client.Action.List(ctx, hcloud.ActionListOpts{ID: ids, ListOpts: hcloud.ListOpts{PerPage: 50}})
		if err != nil {
			t.Fatal(err)
		}
		if len(actions) == 0 {
			break
		}
		for _, a := range actions {
			if a.Command != "start_server" || a.Status != hcloud.ActionStatusSuccess {
				continue
			}
			for _, r := range a.Resources {
				if at, ok := ran[r.ID]; r.Type == hcloud.ActionResourceTypeServer && (!ok || a.Finished.Before(at)) {
					ran[r.ID] = a.Finished
				}
			}
		}
	}

	lastLook := map[int64]time.Time{}
	flowDeletes := 0
	for _, r := range e.fake.Requests() {
		id, err := strconv.ParseInt(strings.TrimPrefix(r.Path, "/servers/"), 10, 64)
		if err != nil {
			continue
		}
		switch r.Template {
		case "GET /servers/{id}":
			lastLook[id] = r.Time
		case "DELETE /servers/{id}":
			if deletedByUs[id] {
				continue
			}
			flowDeletes++
			at, ok := ran[id]
			if !ok || at.After(r.Time) {
				continue // it had not run when it was deleted
			}
			if look, looked := lastLook[id]; !looked {
				t.Errorf("server %d, which ran at %s, was deleted by its flow at %s without a look-up",
					id, at.Sub(epoch), r.Time.Sub(epoch))
			} else if !at.After(look) {
				t.Errorf("server %d, which ran at %s, was deleted by its flow at %s after its look-up at %s",
					id, at.Sub(epoch), r.Time.Sub(epoch), look.Sub(epoch))
			}
		}
	}
	for _, p := range pools {
		servers := e.servers(p.Name())
		for _, s := range servers {
			if _, ok := ran[s.ID]; !ok {
				t.Errorf("pool %s: server %d (%s) never ran, yet it is left", p.Name(), s.ID, s.Status)
			}
		}
		st := p.Status()
		if st.Target != len(servers)+st.Failed {
			t.Errorf("pool %s: Status() = %+v with %d servers left; want target = servers + placeholders", p.Name(), st, len(servers))
		}
		for _, in := range st.Errors {
			if in.ServerID != 0 {
				t.Errorf("pool %s: server instance %+v carries error info", p.Name(), in)
			}
		}
	}
	t.Logf("%d servers ran, %d deleted by their flows, %d by the autoscaler", len(ran), flowDeletes, len(deletedByUs))
}
