package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestIncreaseSizeReturnsBeforeAnyActionFinishes(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 60))
	ctx := t.Context()

	start := time.Now()
	if err := p.IncreaseSize(ctx, 50); err != nil {
		t.Fatalf("IncreaseSize(50) error: %v", err)
	}
	elapsed := time.Since(start)
	if got := p.TargetSize(); got != 50 {
		t.Errorf("TargetSize() right after IncreaseSize(50) = %d; want 50", got)
	}
	if got, want := countStates(p.Instances()), map[string]int{"creating": 50}; !gocmp.Equal(got, want) {
		t.Errorf("Instances() by state right after IncreaseSize(50) = %v; want %v", got, want)
	}
	// The fake's clock has not moved, so no create action can have
	// finished: IncreaseSize cannot have waited for one.
	e.eventually("50 create requests", 0, func() bool { return e.fake.Count("POST /servers") == 50 })
	for _, s := range e.servers("workers") {
		if s.Status != hcloud.ServerStatusInitializing {
			t.Errorf("server %s has status %s before the clock moved; want initializing", s.Name, s.Status)
		}
	}
	if got := p.TargetSize(); got != 50 {
		t.Errorf("TargetSize() while creating = %d; want 50", got)
	}
	t.Logf("IncreaseSize(50) returned after %s", elapsed)

	e.settle(p)
	servers := e.servers("workers")
	if len(servers) != 50 {
		t.Fatalf("fake holds %d servers of the pool; want 50", len(servers))
	}
	for _, s := range servers {
		if s.Status != hcloud.ServerStatusRunning {
			t.Errorf("server %s status = %s; want running", s.Name, s.Status)
		}
	}
	if got := p.TargetSize(); got != 50 {
		t.Errorf("TargetSize() after the servers run = %d; want 50", got)
	}
	ins := p.Instances()
	if got, want := countStates(ins), map[string]int{"running": 50}; !gocmp.Equal(got, want) {
		t.Errorf("Instances() by state after the servers run = %v; want %v", got, want)
	}
	for _, in := range ins {
		if want := "hcloud://" + itoa(in.ServerID); in.ID != want {
			t.Errorf("instance %s ID = %q; want %q", in.Name, in.ID, want)
		}
	}
	if got := e.fake.Count("GET /servers"); got != 1 {
		t.Errorf("GET /servers requests = %d; want 1 (the first listing)", got)
	}
}

func TestCreateRequestCarriesEveryOption(t *testing.T) {
	tests := []struct {
		name   string
		subnet string
		// wantCommands are the server actions after the create request.
		wantPaths []string
	}{
		{name: "network in the create request", wantPaths: nil},
		{name: "subnet range: create stopped, attach, power on", subnet: "10.0.1.0/24",
			wantPaths: []string{"POST /servers/{id}/actions/attach_to_network", "POST /servers/{id}/actions/poweron"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.addReferences()
			cfg := poolConfig("workers", 0, 10)
			cfg.ServerLabels["team"] = "a"
			cfg.Network = "net"
			cfg.Firewalls = []string{"fw", "fw2"}
			cfg.SSHKeys = []string{"key"}
			cfg.PlacementGroup = "pg"
			cfg.PublicIPv6 = false
			if tt.subnet != "" {
				cfg.SubnetIPRange = mustPrefix(tt.subnet)
			}
			deps := e.deps(cfg)
			p := e.newPoolWith(cfg, deps)

			if err := p.IncreaseSize(t.Context(), 3); err != nil {
				t.Fatalf("IncreaseSize(3) error: %v", err)
			}
			e.settle(p)

			img, _, err := e.client.Image.GetByNameAndArchitecture(t.Context(), "ubuntu-24.04", hcloud.ArchitectureX86)
			if err != nil || img == nil {
				t.Fatalf("image lookup: %v, %v", img, err)
			}
			servers := e.servers("workers")
			if len(servers) != 3 {
				t.Fatalf("fake holds %d servers; want 3", len(servers))
			}
			for _, s := range servers {
				want := hcloudtest.ServerInfo{
					Name:       s.Name,
					Status:     hcloud.ServerStatusRunning,
					ServerType: "cx23",
					Location:   "fsn1",
					ImageID:    img.ID,
					Labels: map[string]string{
						config.LabelNodeGroup: "workers", config.LabelCluster: testCluster, "team": "a",
						config.LabelUserDataHash: UserDataHash(testCloudInit),
					},
					UserData:       testCloudInit,
					SSHKeys:        []int64{deps.SSHKeys[0].ID},
					Networks:       []int64{deps.Network.ID},
					Firewalls:      []int64{deps.Firewalls[0].ID, deps.Firewalls[1].ID},
					PlacementGroup: deps.PlacementGroup.ID,
				}
				if diff := gocmp.Diff(want, s, cmpopts.IgnoreFields(hcloudtest.ServerInfo{}, "ID", "PublicIPv4", "PublicIPv6", "Created")); diff != "" {
					t.Errorf("server %s (-want +got):\n%s", s.Name, diff)
				}
				if s.PublicIPv4 == "" || s.PublicIPv6 != "" {
					t.Errorf("server %s public IPs = %q, %q; want IPv4 only", s.Name, s.PublicIPv4, s.PublicIPv6)
				}
				if !strings.HasPrefix(s.Name, "workers-") || len(s.Name) != len("workers-")+16 {
					t.Errorf("server name %q; want workers-<16 hex digits>", s.Name)
				}
			}
			if tt.subnet != "" {
				srv, _, err := e.client.Server.GetByID(t.Context(), servers[0].ID)
				if err != nil {
					t.Fatal(err)
				}
				pn := srv.PrivateNetFor(deps.Network)
				if pn == nil || !mustPrefix(tt.subnet).Contains(netipAddr(pn.IP.String())) {
					t.Errorf("server private net = %+v; want an IP in %s", pn, tt.subnet)
				}
			}
			for _, path := range []string{"POST /servers/{id}/actions/attach_to_network", "POST /servers/{id}/actions/poweron"} {
				want := 0
				if slices.Contains(tt.wantPaths, path) {
					want = 3
				}
				if got := e.fake.Count(path); got != want {
					t.Errorf("%s requests = %d; want %d", path, got, want)
				}
			}
		})
	}
}

func TestWaiterPollsPerTickNotPerServer(t *testing.T) {
	for _, n := range []int{10, 50} {
		t.Run(itoa(int64(n)), func(t *testing.T) {
			e := newEnv(t, envOptions{manualTicks: true, fake: []hcloudtest.Option{
				hcloudtest.WithActionDuration("create_server", 2*time.Second),
				hcloudtest.WithActionDuration("start_server", 0),
			}})
			p := e.newPool(poolConfig("workers", 0, 60))
			if err := p.IncreaseSize(t.Context(), n); err != nil {
				t.Fatalf("IncreaseSize(%d) error: %v", n, err)
			}
			e.eventually("create requests", 0, func() bool { return e.fake.Count("POST /servers") == n })
			// create_server and start_server of every server.
			e.eventually("waiter to hold every action", 0, func() bool { return e.waiter.Pending() == 2*n })
			ticks := 0
			for !settled(p) && ticks < 20 {
				// Step only while the waiter sleeps on the clock (its
				// timer may span several intervals), so that no Step
				// passes while it polls.
				e.eventually("the waiter to sleep on the clock", 0, func() bool { return e.ticker.sleeping() || settled(p) })
				if settled(p) {
					break
				}
				e.clock.Step(actionwait.DefaultPollInterval)
				ticks++
			}
			e.settle(p)
			polls := e.fake.Count("GET /actions")
			// 2 s of action at 500 ms per tick: 4 ticks; each lists
			// ⌈2n/50⌉ running actions (create_server and start_server),
			// 50 per request.
			wantMax := ticks * ((2*n + 49) / 50)
			if polls > wantMax || polls >= n {
				t.Errorf("GET /actions = %d after %d ticks for %d servers; want at most %d and fewer than %d", polls, ticks, n, wantMax, n)
			}
			t.Logf("n=%d: %d ticks, %d GET /actions", n, ticks, polls)
			if got := len(e.servers("workers")); got != n {
				t.Errorf("servers = %d; want %d", got, n)
			}
		})
	}
}

func TestCapacityErrorsMakePlaceholdersAndFailFast(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 20))
	for range 3 {
		e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{
			Code:    "resource_unavailable",
			Message: "we are unable to provision servers for this location, try with a different location or try later",
		})
	}
	if err := p.IncreaseSize(t.Context(), 10); err != nil {
		t.Fatalf("IncreaseSize(10) error: %v", err)
	}
	e.settle(p)

	if got := len(e.servers("workers")); got != 7 {
		t.Errorf("servers in the fake = %d; want 7", got)
	}
	ins := p.Instances()
	want := map[string]int{"running": 7, "creating/OutOfResources/resource_unavailable": 3}
	if diff := gocmp.Diff(want, countStates(ins)); diff != "" {
		t.Errorf("Instances() by state (-want +got):\n%s", diff)
	}
	for _, in := range ins {
		if in.Error == nil {
			continue
		}
		if pool, name, ok := ParseClaimID(in.ID); !ok || pool != "workers" || name != in.Name {
			t.Errorf("placeholder ID %q; want a claim ID of pool workers and name %s", in.ID, in.Name)
		}
		if !strings.Contains(in.Error.Message, "unable to provision") {
			t.Errorf("placeholder message %q; want the API's message", in.Error.Message)
		}
	}
	if got := p.TargetSize(); got != 10 {
		t.Errorf("TargetSize() = %d; want 10 (7 servers and 3 placeholders)", got)
	}

	posts := e.fake.Count("POST /servers")
	requests := len(e.fake.Requests())
	start := time.Now()
	err := p.IncreaseSize(t.Context(), 1)
	if !errors.Is(err, ErrOfferingUnavailable) {
		t.Fatalf("IncreaseSize(1) after capacity errors = %v; want ErrOfferingUnavailable", err)
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.ServerType != "cx23" || ue.Location != "fsn1" || ue.Code != "resource_unavailable" ||
		ue.Until.After(e.clock.Now().Add(DefaultUnavailableTTL)) || !ue.Until.After(epoch.Add(DefaultUnavailableTTL)) {
		t.Errorf("IncreaseSize(1) error = %#v; want cx23 in fsn1, resource_unavailable, until 5m after the failure", ue)
	}
	// The request count below is the proof; the bound only catches a wait
	// (a loaded CI machine with the race detector is slow, not waiting).
	if d := time.Since(start); d > time.Second {
		t.Errorf("failing IncreaseSize took %s; want it immediate", d)
	}
	if got := len(e.fake.Requests()); got != requests {
		t.Errorf("failing IncreaseSize made %d API requests; want none", got-requests)
	}
	if got := p.TargetSize(); got != 10 {
		t.Errorf("TargetSize() after the refused IncreaseSize = %d; want 10", got)
	}
	if st := p.Status(); len(st.Unavailable) != 1 || st.PendingClaims != 0 || st.Failed != 3 {
		t.Errorf("Status() = %+v; want one unavailable offering, 0 pending claims, 3 failed", st)
	}

	// After the TTL the pool asks again.
	e.clock.Step(DefaultUnavailableTTL)
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1) after the TTL error: %v", err)
	}
	e.settle(p)
	if got := e.fake.Count("POST /servers"); got != posts+1 {
		t.Errorf("POST /servers after the TTL = %d; want %d", got, posts+1)
	}
}

func TestFailureAfterCreateLeavesNoServer(t *testing.T) {
	tests := []struct {
		name    string
		subnet  bool
		command string
	}{
		{name: "create_server fails", command: "create_server"},
		{name: "start_server fails", command: "start_server"},
		{name: "attach_to_network fails", subnet: true, command: "attach_to_network"},
		{name: "poweron fails", subnet: true, command: "start_server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			cfg := poolConfig("workers", 0, 10)
			if tt.subnet {
				e.addReferences()
				cfg.Network = "net"
				cfg.SubnetIPRange = mustPrefix("10.0.1.0/24")
			}
			p := e.newPool(cfg)
			e.fake.FailAction(tt.command, "server_error", "the host broke")
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatalf("IncreaseSize(1) error: %v", err)
			}
			e.settle(p)
			if got := e.servers("workers"); len(got) != 0 {
				t.Errorf("servers left in the fake: %+v; want none", got)
			}
			if got := e.fake.Count("DELETE /servers/{id}"); got != 1 {
				t.Errorf("DELETE /servers/{id} = %d; want 1", got)
			}
			ins := p.Instances()
			if len(ins) != 1 || ins[0].Error == nil {
				t.Fatalf("Instances() = %+v; want one placeholder", ins)
			}
			want := Instance{ID: ClaimID("workers", ins[0].Name), State: Creating, Name: ins[0].Name,
				Error:    &ErrorInfo{Class: Other, Code: "server_error", Message: ins[0].Error.Message},
				Offering: config.Offering{ServerType: "cx23", Location: "fsn1"}}
			if diff := gocmp.Diff(want, ins[0]); diff != "" {
				t.Errorf("placeholder (-want +got):\n%s", diff)
			}
			if !strings.Contains(ins[0].Error.Message, "the host broke") {
				t.Errorf("placeholder message %q; want the action's message", ins[0].Error.Message)
			}
			// A non-capacity failure does not block the next claim.
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Errorf("IncreaseSize(1) after a non-capacity failure: %v", err)
			}
			e.settle(p)
		})
	}
}

func TestRetriedCreateMakesOneServer(t *testing.T) {
	tests := []struct {
		name     string
		fault    hcloudtest.RequestFault
		attempts int // create attempts; 0: 3
		posts    int
	}{
		{name: "connection dropped after the server was created", fault: hcloudtest.RequestFault{Drop: true, AfterEffect: true}, posts: 2},
		{name: "connection dropped before", fault: hcloudtest.RequestFault{Drop: true}, posts: 2},
		{name: "503 without a body after the server was created", fault: hcloudtest.RequestFault{Status: 503, AfterEffect: true}, posts: 2},
		{name: "server_error after the server was created", fault: hcloudtest.RequestFault{Code: "server_error", AfterEffect: true}, posts: 2},
		{name: "no retry left: the server is found by name", fault: hcloudtest.RequestFault{Drop: true, AfterEffect: true}, attempts: 1, posts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p := e.newPool(poolConfig("workers", 0, 10), WithRetry(cmp.Or(tt.attempts, 3), time.Millisecond))
			e.fake.FailRequest("POST /servers", 1, tt.fault)
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatalf("IncreaseSize(1) error: %v", err)
			}
			e.settle(p)
			servers := e.servers("workers")
			if len(servers) != 1 {
				t.Fatalf("fake holds %d servers; want exactly 1", len(servers))
			}
			if got := e.fake.Count("POST /servers"); got != tt.posts {
				t.Errorf("POST /servers = %d; want %d", got, tt.posts)
			}
			// Also an adopted server, whose actions are unknown, is
			// reported running once it runs, not with the status it had
			// when it was found.
			ins := p.Instances()
			if len(ins) != 1 || ins[0].ServerID != servers[0].ID || ins[0].Error != nil ||
				ins[0].State != Running || ins[0].Status != hcloud.ServerStatusRunning {
				t.Errorf("Instances() = %+v; want the one server %d running without error", ins, servers[0].ID)
			}
			if got := p.TargetSize(); got != 1 {
				t.Errorf("TargetSize() = %d; want 1", got)
			}
		})
	}
}

func TestUniquenessErrorOnForeignServerFails(t *testing.T) {
	e := newEnv(t, envOptions{})
	// The pool waits on the fake clock, so the retried create is not sent
	// before the test relabels the server and steps the clock (settle).
	p := e.newPool(poolConfig("workers", 0, 10), WithClock(e.clock))
	// The server a lost response created changed hands: it no longer
	// carries our labels, so it must not be adopted.
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Drop: true, AfterEffect: true})
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.eventually("the first create", 0, func() bool { return len(e.servers("workers")) == 1 })
	e.eventually("the retry's wait", 0, e.clock.HasWaiters)
	if got := e.fake.Count("POST /servers"); got != 1 {
		t.Fatalf("POST /servers = %d before the relabel; want 1 (the retry waits on the clock)", got)
	}
	s := e.servers("workers")[0]
	if err := e.fake.SetServerLabels(s.ID, map[string]string{"owner": "someone-else"}); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	ins := p.Instances()
	if len(ins) != 1 || ins[0].Error == nil || ins[0].Error.Code != CodeNameTaken {
		t.Errorf("Instances() = %+v; want one placeholder with code %s", ins, CodeNameTaken)
	}
	if _, ok := e.fake.ServerByID(s.ID); !ok {
		t.Errorf("the foreign server %d was deleted; it must be left alone", s.ID)
	}
}

func TestCreationTimeoutDeletesTheServer(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Hour)}})
	p := e.newPool(poolConfig("workers", 0, 10), WithCreationTimeout(300*time.Millisecond))
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	// The create action takes an hour of the fake's time, far more than
	// settle advances; the wall-clock timeout ends the flow, and its
	// delete finishes as settle advances.
	e.settle(p)
	if got := e.servers("workers"); len(got) != 0 {
		t.Errorf("servers left: %+v; want none", got)
	}
	if posts, deletes := e.fake.Count("POST /servers"), e.fake.Count("DELETE /servers/{id}"); posts != deletes {
		t.Errorf("POST /servers = %d, DELETE /servers/{id} = %d; want one delete per created server", posts, deletes)
	}
	ins := p.Instances()
	if len(ins) != 1 || ins[0].Error == nil || ins[0].Error.Code != CodeTimeout || ins[0].Error.Class != Other {
		t.Errorf("Instances() = %+v; want one placeholder with code timeout", ins)
	}
}

func TestServerTypeUnavailableInCatalogue(t *testing.T) {
	e := newEnv(t, envOptions{})
	if err := e.fake.SetServerTypeAvailable("cx23", "fsn1", false); err != nil {
		t.Fatal(err)
	}
	p := e.newPool(poolConfig("workers", 0, 10))
	if err := p.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	if got := e.fake.Count("POST /servers"); got != 0 {
		t.Errorf("POST /servers = %d; want none for a type the catalogue marks unavailable", got)
	}
	want := map[string]int{"creating/OutOfResources/" + CodeServerTypeUnavailable: 2}
	if diff := gocmp.Diff(want, countStates(p.Instances())); diff != "" {
		t.Errorf("Instances() by state (-want +got):\n%s", diff)
	}
	if err := p.IncreaseSize(t.Context(), 1); !errors.Is(err, ErrOfferingUnavailable) {
		t.Errorf("IncreaseSize(1) = %v; want ErrOfferingUnavailable", err)
	}
}

func TestIncreaseSizeChecksBounds(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 5))
	tests := []struct {
		name    string
		n       int
		wantErr string
	}{
		{name: "zero", n: 0, wantErr: "must be positive, got 0"},
		{name: "negative", n: -1, wantErr: "must be positive, got -1"},
		{name: "above max", n: 6, wantErr: "target size 0 + 6 exceeds max size 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.IncreaseSize(t.Context(), tt.n)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("IncreaseSize(%d) = %v; want an error containing %q", tt.n, err, tt.wantErr)
			}
		})
	}
	if err := p.IncreaseSize(t.Context(), 5); err != nil {
		t.Fatalf("IncreaseSize(5) = %v; want nil (exactly max)", err)
	}
	if err := p.IncreaseSize(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "target size 5 + 1 exceeds max size 5") {
		t.Errorf("IncreaseSize(1) at max = %v; want a max-size error", err)
	}
	e.settle(p)
}

func TestConcurrentIncreaseSizeNeverExceedsMax(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 25))
	errs := make(chan error, 40)
	for range 40 {
		go func() { errs <- p.IncreaseSize(t.Context(), 1) }()
	}
	ok := 0
	for range 40 {
		if err := <-errs; err == nil {
			ok++
		}
	}
	if ok != 25 {
		t.Errorf("%d of 40 concurrent IncreaseSize(1) succeeded; want 25 (max)", ok)
	}
	e.settle(p)
	if got := len(e.servers("workers")); got != 25 {
		t.Errorf("servers = %d; want 25", got)
	}
}

// TestAdoptedServerWhoseStartFailed: a server adopted after a lost create
// response that stays off (its start action failed) is a failed create at
// once, not a flow that polls it until the creation timeout; and it is
// deleted.
func TestAdoptedServerWhoseStartFailed(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 10), WithRetry(3, time.Millisecond), WithCreationTimeout(time.Hour))
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Drop: true, AfterEffect: true})
	e.fake.FailAction("start_server", "", "")
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	ins := p.Instances()
	if len(ins) != 1 || ins[0].State != Creating || ins[0].Error == nil || ins[0].Error.Code != CodeActionFailed {
		t.Fatalf("Instances() = %+v; want one placeholder with code %s", ins, CodeActionFailed)
	}
	e.eventually("the off server to be deleted", 100*time.Millisecond, func() bool { return len(e.servers("workers")) == 0 })
}

// TestRemovedClaimSendsNoFurtherAttempt removes a claim while its create
// request waits to be sent again after a transient failure: no further
// attempt is sent, and a server that the failed attempt made anyway (its
// response was lost) is found by name and deleted.
func TestRemovedClaimSendsNoFurtherAttempt(t *testing.T) {
	for _, afterEffect := range []bool{false, true} {
		t.Run(fmt.Sprintf("after-effect=%t", afterEffect), func(t *testing.T) {
			e := newEnv(t, envOptions{})
			// The backoff outlasts the test: only the claim's removal
			// can end it.
			p := e.newPool(poolConfig("workers", 0, 10), WithRetry(3, time.Hour))
			e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "server_error", AfterEffect: afterEffect})
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			e.eventually("the first create request", 0, func() bool { return e.fake.Count("POST /servers") == 1 })
			ins := p.Instances()
			if len(ins) != 1 {
				t.Fatalf("Instances() = %+v; want one claim", ins)
			}
			if err := p.DeleteInstances(t.Context(), []string{ins[0].ID}); err != nil {
				t.Fatalf("DeleteInstances(%s): %v", ins[0].ID, err)
			}
			if got := p.TargetSize(); got != 0 {
				t.Errorf("TargetSize() after the delete = %d; want 0", got)
			}
			e.settle(p)
			if got := e.fake.Count("POST /servers"); got != 1 {
				t.Errorf("POST /servers = %d; want 1: the removed claim sent its create again", got)
			}
			if got := len(e.servers("workers")); got != 0 {
				t.Errorf("fake holds %d servers; want 0", got)
			}
			if got := p.Instances(); len(got) != 0 {
				t.Errorf("Instances() = %+v; want none", got)
			}
		})
	}
}

// TestDefiniteErrorAfterLostResponse: the first create request makes the
// server but its response is lost; the retry fails with an error that is
// not transient. The failure says nothing about the first attempt, so the
// server is looked up by name and adopted, not leaked.
func TestDefiniteErrorAfterLostResponse(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 10))
	e.fake.DropConnection("POST /servers", 1, true)
	// Queued behind the dropped connection: it answers the retry.
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "invalid_input"})
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	servers := e.servers("workers")
	ins := p.Instances()
	if len(servers) != 1 || len(ins) != 1 || ins[0].ServerID != servers[0].ID || ins[0].State != Running {
		t.Errorf("fake holds %+v, Instances() = %+v; want the one server, adopted and running", servers, ins)
	}
	if got := e.fake.Count("POST /servers"); got != 2 {
		t.Errorf("POST /servers = %d; want 2", got)
	}
}
