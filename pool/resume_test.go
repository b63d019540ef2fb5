package pool

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// subnetPoolConfig is a pool that creates its servers stopped and attaches
// them to "net" with a subnet range.
func subnetPoolConfig(name string) config.Pool {
	cfg := poolConfig(name, 0, 5)
	cfg.Network = "net"
	cfg.SubnetIPRange = mustPrefix("10.0.1.0/24")
	return cfg
}

// addLeftover adds a server of the pool as a create flow of an earlier
// process (of this version or an older one) left it.
func (e *env) addLeftover(pool string, status hcloud.ServerStatus, age time.Duration, networks ...int64) int64 {
	e.t.Helper()
	id, err := e.fake.AddServer(hcloudtest.ServerInfo{
		Name: pool + "-0123456789abcdef", Status: status, ServerType: "cx23", Location: "fsn1",
		Labels:   map[string]string{config.LabelNodeGroup: pool, config.LabelCluster: testCluster},
		Networks: networks, Created: e.clock.Now().Add(-age),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// addLeftoverWithHistory creates a server of the pool through the API, so
// that its action history is a real one: stopped (as a subnet pool
// creates them) or, with started, started at its create (as a pool
// without a subnet range does); then each step: "attach" (to "net" with
// the pool's range), "detach", "poweron", "poweroff". The server is then
// age old, and off.
func (e *env) addLeftoverWithHistory(pool string, started bool, age time.Duration, steps ...string) int64 {
	e.t.Helper()
	ctx := e.t.Context()
	start := e.clock.Now()
	res, _, err := e.client.Server.Create(ctx, hcloud.ServerCreateOpts{
		Name: pool + "-0123456789abcdef", ServerType: &hcloud.ServerType{Name: "cx23"},
		Image: &hcloud.Image{Name: "ubuntu-24.04"}, Location: &hcloud.Location{Name: "fsn1"},
		Labels:           map[string]string{config.LabelNodeGroup: pool, config.LabelCluster: testCluster},
		StartAfterCreate: hcloud.Ptr(started),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	srv := res.Server
	e.actionDone(res.Action)
	for _, a := range res.NextActions {
		e.actionDone(a)
	}
	for _, step := range steps {
		var a *hcloud.Action
		switch step {
		case "attach":
			a, _, err = e.client.Server.AttachToNetwork(ctx, srv, hcloud.ServerAttachToNetworkOpts{
				Network: &hcloud.Network{ID: e.networkID()}, IPRange: prefixToIPNet(mustPrefix("10.0.1.0/24")),
			})
		case "detach":
			a, _, err = e.client.Server.DetachFromNetwork(ctx, srv, hcloud.ServerDetachFromNetworkOpts{Network: &hcloud.Network{ID: e.networkID()}})
		case "poweron":
			a, _, err = e.client.Server.Poweron(ctx, srv)
		case "poweroff":
			a, _, err = e.client.Server.Poweroff(ctx, srv)
		default:
			e.t.Fatalf("unknown step %q", step)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		e.actionDone(a)
	}
	if s, _ := e.fake.ServerByID(srv.ID); s.Status != hcloud.ServerStatusOff {
		e.t.Fatalf("server %d is %s; want off", srv.ID, s.Status)
	}
	if passed := e.clock.Now().Sub(start); passed < age {
		e.clock.Step(age - passed)
	}
	return srv.ID
}

// actionDone steps the fake's clock until the action has succeeded.
func (e *env) actionDone(a *hcloud.Action) {
	e.t.Helper()
	e.eventually("action "+a.Command, time.Second, func() bool {
		got, _, err := e.client.Action.GetByID(e.t.Context(), a.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		if got.Status == hcloud.ActionStatusError {
			e.t.Fatalf("action %s failed: %s", a.Command, got.ErrorMessage)
		}
		return got.Status == hcloud.ActionStatusSuccess
	})
}

func (e *env) networkID() int64 {
	e.t.Helper()
	n, _, err := e.client.Network.Get(e.t.Context(), "net")
	if err != nil || n == nil {
		e.t.Fatalf("network: %v, %v", n, err)
	}
	return n.ID
}

// TestResume starts a new pool over servers that create flows left at each
// step, by this version or an older one, and over servers someone stopped
// or detached, and checks which ones it finishes, with which requests, and
// that it never deletes one. Only a server whose action history proves
// that it never ran is attached or powered on, whatever its age.
func TestResume(t *testing.T) {
	tests := []struct {
		name   string
		subnet bool
		status hcloud.ServerStatus
		age    time.Duration
		// attached adds the server to the pool's network already.
		attached bool
		// history creates it through the API, with a real action
		// history (started at its create with started), and then runs
		// steps (see addLeftoverWithHistory).
		history bool
		started bool
		steps   []string
		// resumed says Resume must take the server over (looked says
		// it must look it up, and may leave it); want is the status it
		// must end in.
		resumed, looked bool
		want            hcloud.ServerStatus
		// attach and poweron are the requests the flow must send.
		attach, poweron int
	}{
		{name: "subnet: created stopped, not attached", subnet: true, age: time.Minute,
			history: true, resumed: true, want: hcloud.ServerStatusRunning, attach: 1, poweron: 1},
		{name: "subnet: created stopped, not attached, a day old", subnet: true, age: 24 * time.Hour,
			history: true, resumed: true, want: hcloud.ServerStatusRunning, attach: 1, poweron: 1},
		{name: "subnet: attached, still off", subnet: true, age: time.Minute,
			history: true, steps: []string{"attach"}, resumed: true, want: hcloud.ServerStatusRunning, poweron: 1},
		{name: "subnet: attached, still off, a day old", subnet: true, age: 24 * time.Hour,
			history: true, steps: []string{"attach"}, resumed: true, want: hcloud.ServerStatusRunning, poweron: 1},
		{name: "subnet: attached, off, young, but it ran: stopped by someone", subnet: true, age: time.Minute,
			history: true, steps: []string{"attach", "poweron", "poweroff"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: it ran, then someone stopped and detached it (isolated)", subnet: true, age: time.Minute,
			history: true, steps: []string{"attach", "poweron", "poweroff", "detach"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: it ran, then someone stopped and detached it, a day old", subnet: true, age: 24 * time.Hour,
			history: true, steps: []string{"attach", "poweron", "poweroff", "detach"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: never ran, but someone detached it", subnet: true, age: time.Minute,
			history: true, steps: []string{"attach", "detach"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: detached and attached again by someone", subnet: true, age: time.Minute,
			history: true, steps: []string{"attach", "detach", "attach"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: created started (by the pool before it had a range), stopped by someone", subnet: true, age: time.Minute,
			history: true, started: true, steps: []string{"poweroff"}, looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: attached, off, young, no history", subnet: true, status: hcloud.ServerStatusOff, age: time.Minute, attached: true,
			looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: not attached, off, young, no history", subnet: true, status: hcloud.ServerStatusOff, age: time.Minute,
			looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: attached and off for an hour: stopped by someone", subnet: true, status: hcloud.ServerStatusOff, age: time.Hour, attached: true,
			looked: true, want: hcloud.ServerStatusOff},
		{name: "subnet: running", subnet: true, status: hcloud.ServerStatusRunning, age: time.Minute, attached: true,
			want: hcloud.ServerStatusRunning},
		{name: "plain: off: stopped by someone", status: hcloud.ServerStatusOff, age: time.Minute,
			want: hcloud.ServerStatusOff},
		{name: "plain: starting a day after creation: a power cycle", status: hcloud.ServerStatusStarting, age: 24 * time.Hour,
			want: hcloud.ServerStatusStarting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			cfg := poolConfig("workers", 0, 5)
			var nets []int64
			if tc.subnet {
				e.addReferences()
				cfg = subnetPoolConfig("workers")
				if tc.attached {
					nets = []int64{e.networkID()}
				}
			}
			var id int64
			if tc.history {
				id = e.addLeftoverWithHistory("workers", tc.started, tc.age, tc.steps...)
			} else {
				id = e.addLeftover("workers", tc.status, tc.age, nets...)
			}
			p := e.newPool(cfg)
			if _, err := e.cache.Get(t.Context()); err != nil {
				t.Fatal(err)
			}
			e.fake.ResetCounts()

			got := p.Resume()
			if want := map[bool]int{true: 1, false: 0}[tc.resumed || tc.looked]; got != want {
				t.Fatalf("Resume() = %d; want %d", got, want)
			}
			if tc.resumed {
				in := p.Instances()
				if len(in) != 1 || in[0].State != Creating || in[0].ServerID != id || in[0].Error != nil {
					t.Errorf("Instances() while resuming = %+v; want server %d Creating", in, id)
				}
				if got := p.TargetSize(); got != 1 {
					t.Errorf("TargetSize() while resuming = %d; want 1", got)
				}
			}
			e.settle(p)

			s, ok := e.fake.ServerByID(id)
			if !ok {
				t.Fatalf("server %d was deleted", id)
			}
			if s.Status != tc.want {
				t.Errorf("server status %s; want %s", s.Status, tc.want)
			}
			if got := e.fake.Count("POST /servers/{id}/actions/attach_to_network"); got != tc.attach {
				t.Errorf("%d attach requests; want %d", got, tc.attach)
			}
			if got := e.fake.Count("POST /servers/{id}/actions/poweron"); got != tc.poweron {
				t.Errorf("%d power-on requests; want %d", got, tc.poweron)
			}
			if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
				t.Errorf("%d delete requests; want none", got)
			}
			if tc.attach > 0 {
				if len(s.Networks) != 1 {
					t.Errorf("server networks %v; want the pool's", s.Networks)
				}
				srv, _, err := e.client.Server.GetByID(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				pn := srv.PrivateNet[0]
				if ip, _ := netip.AddrFromSlice(pn.IP); !cfg.SubnetIPRange.Contains(ip.Unmap()) {
					t.Errorf("private IP %s; want one in the subnet range %s", pn.IP, cfg.SubnetIPRange)
				}
			}
			if tc.want == hcloud.ServerStatusRunning {
				// No listing since: the pool reports the server running
				// as soon as its flow saw it run.
				in := p.Instances()
				if len(in) != 1 || in[0].State != Running || in[0].Error != nil {
					t.Errorf("Instances() after resuming = %+v; want the server Running", in)
				}
			}
			if got := p.TargetSize(); got != 1 {
				t.Errorf("TargetSize() = %d; want 1", got)
			}

			// Looking again at the same listing costs nothing and starts
			// nothing: a server left alone stays left alone.
			e.fake.ResetCounts()
			if got := p.Resume(); got != 0 {
				t.Errorf("second Resume() = %d; want 0", got)
			}
			e.settle(p)
			if got := e.fake.Counts(); len(got) != 0 {
				t.Errorf("second Resume made requests %v; want none", got)
			}
		})
	}
}

// TestResumeReportsRunningAtOnce resumes a server that is still
// initializing (a plain pool) and checks that the pool reports it running
// as soon as the API does, without waiting for a listing.
func TestResumeReportsRunningAtOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.addLeftover("workers", hcloud.ServerStatusInitializing, 20*time.Second)
	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1", got)
	}
	// The flow polls the server; it keeps initializing for now.
	e.eventually("the flow to poll the server", 0, func() bool { return e.fake.Count("GET /servers/{id}") >= 2 })
	if st := p.Status(); st.Creating != 1 || st.Running != 0 {
		t.Fatalf("Status() while initializing = %+v; want 1 creating", st)
	}
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusRunning); err != nil {
		t.Fatal(err)
	}
	listings := e.fake.Count("GET /servers")
	e.eventually("the server to be reported running", 0, func() bool { return p.Status().Running == 1 })
	if got := e.fake.Count("GET /servers"); got != listings {
		t.Errorf("%d listings while resuming; want none", got-listings)
	}
	if st := p.Status(); st.PendingClaims != 0 || st.Target != 1 {
		t.Errorf("Status() = %+v; want target 1, no pending claim", st)
	}
}

// TestResumeNeverDeletesARebootedServer: a young server found starting
// may be a create left unfinished, or a node that ran and was rebooted.
// If it then turns off, nothing proves that it never ran: the resumed
// flow leaves it alone instead of deleting it as a failed create.
func TestResumeNeverDeletesARebootedServer(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.addLeftover("workers", hcloud.ServerStatusStarting, 20*time.Second)
	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1", got)
	}
	e.eventually("the flow to poll the server", 0, func() bool { return e.fake.Count("GET /servers/{id}") >= 2 })
	// Shut down by someone while the flow waits for it to run.
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	if s, ok := e.fake.ServerByID(id); !ok || s.Status != hcloud.ServerStatusOff {
		t.Errorf("server %d = %+v, %v; want it left off, not deleted", id, s, ok)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("DELETE /servers/{id} = %d; want none", got)
	}
	for _, in := range p.Instances() {
		if in.Error != nil {
			t.Errorf("instance %+v reported as a failed creation", in)
		}
	}
}

// TestResumeWhileTheOldProcessFinishes runs two pools over one project, as
// during a restart where the old process has not stopped yet: both finish
// the same create flow. The server is attached once, runs, and neither
// deletes it.
func TestResumeWhileTheOldProcessFinishes(t *testing.T) {
	// The attach takes ten minutes, so the new process finds it running.
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("attach_to_network", 10*time.Minute)}})
	e.addReferences()
	cfg := subnetPoolConfig("workers")
	old := e.newPool(cfg)
	if err := old.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	// The old flow's attach runs (the fake clock stands still).
	e.eventually("the old flow's attach", 100*time.Millisecond, func() bool {
		return e.fake.Count("POST /servers/{id}/actions/attach_to_network") == 1
	})

	// The new process's cache lists what the API holds now.
	cache := e.newCache()
	deps := e.deps(cfg)
	deps.Cache = cache
	fresh := e.newPoolWith(cfg, deps)
	if _, err := cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := fresh.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1", got)
	}
	e.eventually("both flows to finish", 10*time.Second, func() bool { return settled(old) && settled(fresh) })

	servers := e.servers("workers")
	if len(servers) != 1 || servers[0].Status != hcloud.ServerStatusRunning || len(servers[0].Networks) != 1 {
		t.Fatalf("servers %+v; want one running, attached once", servers)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("%d delete requests; want none", got)
	}
	for name, p := range map[string]*Pool{"old": old, "new": fresh} {
		st := p.Status()
		if st.Running != 1 || st.Target != 1 || st.Failed != 0 || st.PendingClaims != 0 {
			t.Errorf("%s pool Status() = %+v; want the server running, target 1", name, st)
		}
	}
}

// TestResumeCancelledByDelete deletes a resumed server while its flow
// waits: the flow deletes it and the target drops.
func TestResumeCancelledByDelete(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.addLeftover("workers", hcloud.ServerStatusInitializing, 20*time.Second)
	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1", got)
	}
	if err := p.DeleteInstances(context.Background(), []string{"hcloud://" + itoa(id)}); err != nil {
		t.Fatalf("DeleteInstances: %v", err)
	}
	if got := p.TargetSize(); got != 0 {
		t.Errorf("TargetSize() after the delete = %d; want 0", got)
	}
	e.settle(p)
	if _, ok := e.fake.ServerByID(id); ok {
		t.Errorf("server %d still exists", id)
	}
	if in := p.Instances(); len(in) != 0 {
		t.Errorf("Instances() = %+v; want none", in)
	}
}

// TestResumePollsAtGrowingPauses resumes a server that keeps starting (a
// create flow cut short, or a young server power-cycled by someone) and
// measures the pause before each look-up on the waiter's clock: one poll
// interval, then doubling up to the waiter's MaxGapIntervals, so a long
// start costs a request per ten intervals, not one per interval. The
// server is still reported running once it runs.
func TestResumePollsAtGrowingPauses(t *testing.T) {
	e := newEnv(t, envOptions{manualTicks: true}) // the waiter's timers on the fake clock
	id := e.addLeftover("workers", hcloud.ServerStatusStarting, 20*time.Second)
	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCounts()
	if got := p.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1", got)
	}
	iv := actionwait.DefaultPollInterval
	want := []time.Duration{iv, 2 * iv, 4 * iv, 8 * iv, 10 * iv, 10 * iv, 10 * iv}
	var got []time.Duration
	for i := range want {
		// The flow looked the server up (once on resuming, then once per
		// pause) and sleeps on the clock until the next look.
		e.eventually("the flow to sleep before its next look-up", 0, func() bool {
			return e.fake.Count("GET /servers/{id}") == i+1 && e.ticker.sleeping()
		})
		pause := e.ticker.pause()
		got = append(got, pause)
		e.clock.Step(pause)
	}
	if !slices.Equal(got, want) {
		t.Errorf("pauses before each look-up %v; want %v", got, want)
	}
	// The server runs: the look-up after the current pause finds it.
	e.eventually("the flow to sleep before its next look-up", 0, func() bool {
		return e.fake.Count("GET /servers/{id}") == len(want)+1 && e.ticker.sleeping()
	})
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusRunning); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(e.ticker.pause())
	e.eventually("the server to be reported running", 0, func() bool { return p.Status().Running == 1 })
	if _, ok := e.fake.ServerByID(id); !ok {
		t.Fatal("the resumed server was deleted")
	}
}

// TestResumedFlowKeepsANodeThatRan: after a restart, a young server that
// ran is listed as starting (a reset), so the new process takes it for an
// unfinished create and waits for it; then it goes off (shut down). The
// flow ends as a failed create, yet the server ran: it is kept and
// reported running, not deleted as a failed creation.
func TestResumedFlowKeepsANodeThatRan(t *testing.T) {
	e := newEnv(t, envOptions{})
	res, _, err := e.client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
		Name: "workers-0123456789abcdef", ServerType: &hcloud.ServerType{Name: "cx23"},
		Image: &hcloud.Image{Name: "ubuntu-24.04"}, Location: &hcloud.Location{Name: "fsn1"},
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Server.ID
	e.clock.Step(time.Minute) // it runs
	if s, _ := e.fake.ServerByID(id); s.Status != hcloud.ServerStatusRunning {
		t.Fatalf("server %d is %s; want running", id, s.Status)
	}
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusStarting); err != nil {
		t.Fatal(err)
	}

	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Resume(); got != 1 {
		t.Fatalf("Resume() = %d; want 1: a young starting server may be an unfinished create", got)
	}
	e.eventually("the flow to poll the server", 0, func() bool { return e.fake.Count("GET /servers/{id}") >= 2 })
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	e.settle(p)

	s, ok := e.fake.ServerByID(id)
	if !ok {
		t.Fatalf("server %d, which ran, was deleted by the resumed flow", id)
	}
	if s.Status != hcloud.ServerStatusOff {
		t.Errorf("server status %s; want off", s.Status)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("DELETE /servers/{id} = %d; want none", got)
	}
	in := p.Instances()
	if len(in) != 1 || in[0].ServerID != id || in[0].State != Running || in[0].Error != nil {
		t.Errorf("Instances() = %+v; want server %d Running without error", in, id)
	}
	if st := p.Status(); st.Target != 1 || st.PendingClaims != 0 || st.Failed != 0 {
		t.Errorf("Status() = %+v; want target 1, no claim, nothing failed", st)
	}
}

// TestReconfigureToASubnetRangeChangesNoServer: a reload gives a pool a
// subnet range, so Resume looks at its stopped servers that are not on the
// network. None of them is a create flow of a subnet pool: one ran and was
// stopped by someone, one was created started and its start failed. Neither
// is attached or powered on: Reconfigure changes no server that exists.
func TestReconfigureToASubnetRangeChangesNoServer(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.addReferences()
	ran := e.addLeftoverWithHistory("workers", true, time.Minute, "poweroff")

	e.fake.FailAction("start_server", "", "")
	res, _, err := e.client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
		Name: "workers-00000000000000ff", ServerType: &hcloud.ServerType{Name: "cx23"},
		Image: &hcloud.Image{Name: "ubuntu-24.04"}, Location: &hcloud.Location{Name: "fsn1"},
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster},
	})
	if err != nil {
		t.Fatal(err)
	}
	failedStart := res.Server.ID
	e.eventually("the start to fail", time.Second, func() bool {
		s, _ := e.fake.ServerByID(failedStart)
		return s.Status == hcloud.ServerStatusOff
	})

	p := e.newPool(poolConfig("workers", 0, 5))
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Resume(); got != 0 {
		t.Fatalf("Resume() before the reload = %d; want 0", got)
	}
	cfg := subnetPoolConfig("workers")
	if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCounts()
	p.Resume()
	e.settle(p)

	for _, id := range []int64{ran, failedStart} {
		s, ok := e.fake.ServerByID(id)
		if !ok || s.Status != hcloud.ServerStatusOff || len(s.Networks) != 0 {
			t.Errorf("server %d after the reload = %+v, %v; want it left off and not attached", id, s, ok)
		}
	}
	for _, req := range []string{"POST /servers/{id}/actions/attach_to_network", "POST /servers/{id}/actions/poweron", "DELETE /servers/{id}"} {
		if got := e.fake.Count(req); got != 0 {
			t.Errorf("%s = %d after the reload; want none", req, got)
		}
	}
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() = %d; want 2", got)
	}
}
