package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// instanceByName returns the instance named name, or fails.
func instanceByName(t *testing.T, p *Pool, name string) Instance {
	t.Helper()
	for _, in := range p.Instances() {
		if in.Name == name {
			return in
		}
	}
	t.Fatalf("no instance named %s in %+v", name, p.Instances())
	return Instance{}
}

// poolLabels returns the labels of a server of pool that no flow made.
func poolLabels(pool string, extra ...string) map[string]string {
	l := map[string]string{config.LabelNodeGroup: pool, config.LabelCluster: testCluster}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// TestSurgeAboveMax: a pool at its max surges once with maxSurge 1; the
// claim counts at once and carries Replaces; a second surge, a surge with
// maxSurge 0 and IncreaseSize are refused; the server is created with
// LabelReplaces, shows Replaces once it runs and is no drift; once the
// old server is deleted, the pool is back at its max.
func TestSurgeAboveMax(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 2, 2)
	ctx := t.Context()
	old := p.Instances()[0]
	other := p.Instances()[1]

	name, err := p.Surge(ctx, old.ServerID, 1)
	if err != nil {
		t.Fatalf("Surge(%d, 1) at max error: %v", old.ServerID, err)
	}
	if !strings.HasPrefix(name, "workers-") {
		t.Errorf("Surge() name = %q; want a server name of the pool", name)
	}
	if got := p.TargetSize(); got != 3 {
		t.Errorf("TargetSize() right after Surge = %d; want 3", got)
	}
	if in := instanceByName(t, p, name); in.Replaces != old.ServerID || in.State != Creating {
		t.Errorf("surge claim instance = %+v; want Creating, Replaces %d", in, old.ServerID)
	}

	if _, err := p.Surge(ctx, other.ServerID, 1); !errors.Is(err, ErrAboveMax) ||
		!strings.Contains(err.Error(), `pool "workers"`) || !strings.Contains(err.Error(), "target size 3") ||
		!strings.Contains(err.Error(), "max size 2") || !strings.Contains(err.Error(), "surge 1") {
		t.Errorf("second Surge(maxSurge 1) = %v; want ErrAboveMax naming pool, target, max and surge", err)
	}
	if _, err := p.Surge(ctx, other.ServerID, 0); !errors.Is(err, ErrAboveMax) {
		t.Errorf("Surge(maxSurge 0) above max = %v; want ErrAboveMax", err)
	}
	if err := p.IncreaseSize(ctx, 1); !errors.Is(err, ErrAboveMax) {
		t.Errorf("IncreaseSize(1) above max = %v; want ErrAboveMax", err)
	}
	// Idempotent while the claim is pending.
	if again, err := p.Surge(ctx, old.ServerID, 1); err != nil || again != name {
		t.Errorf("repeated Surge(%d) = %q, %v; want %q, nil", old.ServerID, again, err, name)
	}
	if got := p.TargetSize(); got != 3 {
		t.Errorf("TargetSize() after the repeated Surge = %d; want 3", got)
	}

	e.settle(p)
	var created hcloudtest.ServerInfo
	for _, s := range e.servers("workers") {
		if s.Name == name {
			created = s
		}
	}
	if created.ID == 0 {
		t.Fatalf("no server %s in the fake", name)
	}
	if got := created.Labels[config.LabelReplaces]; got != itoa(old.ServerID) {
		t.Errorf("server %s label %s = %q; want %q", name, config.LabelReplaces, got, itoa(old.ServerID))
	}
	if created.Labels[config.LabelNodeGroup] != "workers" || created.Labels[config.LabelCluster] != testCluster || created.Labels[config.LabelUserDataHash] == "" {
		t.Errorf("server %s labels = %v; want the pool's labels too", name, created.Labels)
	}
	if in := instanceByName(t, p, name); in.Replaces != old.ServerID || in.State != Running || in.ServerID != created.ID {
		t.Errorf("surge server instance = %+v; want Running, server %d, Replaces %d", in, created.ID, old.ServerID)
	}
	for _, in := range p.Instances() {
		if in.Name != name && in.Replaces != 0 {
			t.Errorf("instance %+v has Replaces; only the surge server should", in)
		}
	}
	// After a listing too, and idempotent from the listed server.
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if in := instanceByName(t, p, name); in.Replaces != old.ServerID {
		t.Errorf("surge server instance after a listing = %+v; want Replaces %d", in, old.ServerID)
	}
	if again, err := p.Surge(ctx, old.ServerID, 1); err != nil || again != name {
		t.Errorf("Surge(%d) once its server runs = %q, %v; want %q, nil", old.ServerID, again, err, name)
	}
	// The extra label is no drift.
	drift, err := p.Drift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drift {
		if d.ServerID == created.ID {
			t.Errorf("Drift() reports the surge server: %+v", d)
		}
	}

	if err := p.DeleteInstances(ctx, []string{old.ID}); err != nil {
		t.Fatalf("DeleteInstances(old) error: %v", err)
	}
	e.settle(p)
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() after the old server's delete = %d; want 2", got)
	}
	if err := p.IncreaseSize(ctx, 1); !errors.Is(err, ErrAboveMax) {
		t.Errorf("IncreaseSize(1) at max = %v; want ErrAboveMax", err)
	}
	// The next replacement may surge again.
	if _, err := p.Surge(ctx, other.ServerID, 1); err != nil {
		t.Errorf("Surge(%d, 1) at max after the first replacement = %v", other.ServerID, err)
	}
	e.settle(p)
}

func TestSurgeBelowMaxNeedsNoSurge(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 3, 2)
	if _, err := p.Surge(t.Context(), p.Instances()[0].ServerID, 0); err != nil {
		t.Fatalf("Surge(maxSurge 0) below max error: %v", err)
	}
	if _, err := p.Surge(t.Context(), p.Instances()[1].ServerID, 0); !errors.Is(err, ErrAboveMax) {
		t.Fatalf("Surge(maxSurge 0) at max = %v; want ErrAboveMax", err)
	}
	e.settle(p)
}

func TestSurgeRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 0, 2, 1)
	ctx := t.Context()
	for _, tt := range []struct {
		replaces int64
		maxSurge int
	}{{0, 1}, {-3, 1}, {5, -1}} {
		if name, err := p.Surge(ctx, tt.replaces, tt.maxSurge); !errors.Is(err, ErrInvalidDelta) || name != "" {
			t.Errorf("Surge(%d, %d) = %q, %v; want ErrInvalidDelta", tt.replaces, tt.maxSurge, name, err)
		}
	}

	p.offerings.mark(UnavailableError{ServerType: "cx23", Location: "fsn1", Code: "resource_unavailable"}, time.Minute)
	if _, err := p.Surge(ctx, 5, 1); !errors.Is(err, ErrOfferingUnavailable) {
		t.Errorf("Surge() with the offering unavailable = %v; want ErrOfferingUnavailable", err)
	}
	e.clock.Step(2 * time.Minute)

	p.Remove()
	if _, err := p.Surge(ctx, 5, 1); !errors.Is(err, ErrRemoved) {
		t.Errorf("Surge() of a removed pool = %v; want ErrRemoved", err)
	}
	if got := p.TargetSize(); got != 1 {
		t.Errorf("TargetSize() after refused surges = %d; want 1", got)
	}

	closed := e.newPool(poolConfig("closed", 0, 2))
	if err := closed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Surge(ctx, 5, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Surge() of a closed pool = %v; want ErrClosed", err)
	}
}

// TestSurgeFindsListedReplacement: a replacement made by an earlier
// process (a listed server labelled LabelReplaces) makes Surge return its
// name, unless it is being deleted; labels that are no canonical positive
// ID are no Replaces.
func TestSurgeFindsListedReplacement(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("delete_server", time.Minute)}})
	p := scaled(t, e, "workers", 0, 3, 1)
	ctx := t.Context()
	add := func(name, replaces string) int64 {
		t.Helper()
		id, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: name, Labels: poolLabels("workers", config.LabelReplaces, replaces)})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	add("workers-earlier", "77")
	add("workers-badlabel", "077")
	add("workers-notanumber", "x")
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.TargetSize(); got != 4 {
		t.Fatalf("TargetSize() = %d; want 4", got)
	}
	if in := instanceByName(t, p, "workers-earlier"); in.Replaces != 77 {
		t.Errorf("listed replacement instance = %+v; want Replaces 77", in)
	}
	for _, n := range []string{"workers-badlabel", "workers-notanumber"} {
		if in := instanceByName(t, p, n); in.Replaces != 0 {
			t.Errorf("instance with an invalid %s = %+v; want Replaces 0", config.LabelReplaces, in)
		}
	}
	// At max + 1 already: the existing replacement is returned all the
	// same, and nothing is recorded.
	if name, err := p.Surge(ctx, 77, 1); err != nil || name != "workers-earlier" {
		t.Errorf("Surge(77) = %q, %v; want workers-earlier, nil", name, err)
	}
	if got := p.TargetSize(); got != 4 {
		t.Errorf("TargetSize() after the idempotent Surge = %d; want 4", got)
	}

	// Being deleted, it no longer counts as the replacement.
	if err := p.DeleteInstances(ctx, []string{"workers-earlier"}); err != nil {
		t.Fatal(err)
	}
	name, err := p.Surge(ctx, 77, 2)
	if err != nil || name == "workers-earlier" {
		t.Fatalf("Surge(77) while the earlier replacement is deleted = %q, %v; want a new claim", name, err)
	}
	if got := p.TargetSize(); got != 4 {
		t.Errorf("TargetSize() = %d; want 4 (3 servers and the claim)", got)
	}
	e.settle(p)
}

// TestSurgeResumedKeepsReplaces: a replacement whose create flow a
// restart left unfinished is resumed with its Replaces.
func TestSurgeResumedKeepsReplaces(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 2))
	id, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "workers-resumed", Status: hcloud.ServerStatusInitializing,
		Labels: poolLabels("workers", config.LabelReplaces, "42")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := p.Resume(); n != 1 {
		t.Fatalf("Resume() = %d; want 1", n)
	}
	if in := instanceByName(t, p, "workers-resumed"); in.Replaces != 42 || in.State != Creating {
		t.Errorf("resumed instance = %+v; want Creating, Replaces 42", in)
	}
	if name, err := p.Surge(t.Context(), 42, 1); err != nil || name != "workers-resumed" {
		t.Errorf("Surge(42) = %q, %v; want workers-resumed, nil", name, err)
	}
	if err := e.fake.SetServerStatus(id, hcloud.ServerStatusRunning); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	if in := instanceByName(t, p, "workers-resumed"); in.Replaces != 42 || in.State != Running {
		t.Errorf("resumed instance once running = %+v; want Running, Replaces 42", in)
	}
}

// TestSurgeKeepsLabelThroughAdoption: a create whose response was lost
// is adopted by name; the server carries LabelReplaces all the same.
func TestSurgeKeepsLabelThroughAdoption(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 0))
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Drop: true, AfterEffect: true})
	name, err := p.Surge(t.Context(), 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	servers := e.servers("workers")
	if len(servers) != 1 || servers[0].Name != name || servers[0].Labels[config.LabelReplaces] != "9" {
		t.Fatalf("servers = %+v; want %s labelled %s=9", servers, name, config.LabelReplaces)
	}
	if got := e.fake.Count("POST /servers"); got != 2 {
		t.Errorf("POST /servers = %d; want 2 (the lost one and the retry that adopted)", got)
	}
	if in := instanceByName(t, p, name); in.Replaces != 9 || in.State != Running {
		t.Errorf("adopted surge server = %+v; want Running, Replaces 9", in)
	}
}

func TestSurgeLabelCannotBeConfigured(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("workers", 0, 2)
	cfg.ServerLabels[config.LabelReplaces] = "1"
	if _, err := New(cfg, e.deps(cfg), WithClusterName(testCluster)); err == nil || !strings.Contains(err.Error(), config.LabelReplaces) {
		t.Errorf("New() with a configured %s = %v; want an error naming it", config.LabelReplaces, err)
	}
}

// TestServers: the pool's listed servers by ID, as copies, without those
// being deleted (by us, or listed as deleting).
func TestServers(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("delete_server", time.Minute)}})
	p := e.newPool(poolConfig("workers", 0, 5))
	if got := p.Servers(); got != nil {
		t.Errorf("Servers() before any listing = %+v; want nil", got)
	}
	if err := p.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	listedDeleting, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "workers-going", Status: hcloud.ServerStatusDeleting, Labels: poolLabels("workers")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "other-1", Labels: poolLabels("other")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	fake := e.servers("workers")
	got := p.Servers()
	if len(got) != 3 {
		t.Fatalf("Servers() = %+v; want the 3 servers not being deleted", got)
	}
	if !slices.IsSortedFunc(got, func(a, b servercache.Server) int { return int(a.ID - b.ID) }) {
		t.Errorf("Servers() not sorted by ID: %+v", got)
	}
	byID := map[int64]hcloudtest.ServerInfo{}
	for _, s := range fake {
		byID[s.ID] = s
	}
	for _, s := range got {
		f, ok := byID[s.ID]
		switch {
		case !ok || s.ID == listedDeleting:
			t.Errorf("Servers() has %+v; want only the pool's servers not being deleted", s)
		case s.Name != f.Name || s.Status != hcloud.ServerStatusRunning || s.Pool != "workers" || s.Created.IsZero() ||
			s.ServerType != "cx23" || s.Location != "fsn1" || s.Labels[config.LabelUserDataHash] == "" || s.Labels[config.LabelNodeGroup] != "workers":
			t.Errorf("Servers() record %+v does not match the fake's %+v", s, f)
		}
	}

	// Copies: a caller changing them changes nothing in the pool.
	got[0].Labels[config.LabelReplaces] = "1"
	got[0].Labels[config.LabelNodeGroup] = "elsewhere"
	if again := p.Servers(); again[0].Labels[config.LabelReplaces] != "" || again[0].Labels[config.LabelNodeGroup] != "workers" {
		t.Errorf("Servers() after the caller changed a returned map = %+v; want the cache's labels", again[0])
	}
	if in := instanceByName(t, p, got[0].Name); in.Replaces != 0 {
		t.Errorf("instance %+v has Replaces after the caller changed a copy", in)
	}

	// A server we delete leaves at once.
	victim := got[1]
	if err := p.DeleteInstances(t.Context(), []string{victim.ProviderID()}); err != nil {
		t.Fatal(err)
	}
	after := p.Servers()
	if len(after) != 2 || slices.ContainsFunc(after, func(s servercache.Server) bool { return s.ID == victim.ID }) {
		t.Errorf("Servers() while %d is deleted = %+v; want the 2 others", victim.ID, after)
	}
	if got := countStates(p.Instances()); got["deleting"] != 2 {
		t.Errorf("Instances() = %v; want 2 deleting (ours and the listed one)", got)
	}
	e.settle(p)
	if got := p.Servers(); len(got) != 2 {
		t.Errorf("Servers() after the delete = %+v; want 2", got)
	}
}

// TestServersSkipsCancelledClaims: the server of a claim cancelled while
// its create ran is being deleted by its flow: not in Servers.
func TestServersSkipsCancelledClaims(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Minute)}})
	p := e.newPool(poolConfig("workers", 0, 5))
	name, err := p.Surge(t.Context(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	e.eventually("the create request to return", 0, func() bool {
		id = instanceByName(t, p, name).ServerID
		return id != 0
	})
	if _, err := e.cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Servers(); len(got) != 1 || got[0].ID != id || got[0].Labels[config.LabelReplaces] != "3" {
		t.Fatalf("Servers() with a creating server listed = %+v; want server %d labelled %s=3", got, id, config.LabelReplaces)
	}
	if err := p.DeleteInstances(t.Context(), []string{servercache.ProviderIDPrefix + itoa(id)}); err != nil {
		t.Fatal(err)
	}
	if got := p.Servers(); len(got) != 0 {
		t.Errorf("Servers() after the claim was cancelled = %+v; want none", got)
	}
	// The cancelled claim is no replacement any more.
	if again, err := p.Surge(t.Context(), 3, 1); err != nil || again == name {
		t.Errorf("Surge(3) after the replacement was cancelled = %q, %v; want a new claim", again, err)
	}
	e.settle(p)
}

// TestConcurrentSurgeAndIncreaseSize: surges (distinct replaced servers,
// and pairs for the same one), scale-ups and deletes of the initial
// servers at once, in random interleavings over several rounds: the target
// plus the deletes in flight never exceed max + maxSurge, and no more
// servers than that ever exist; surges for one server all get one name.
func TestConcurrentSurgeAndIncreaseSize(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for round := range 6 {
		maxSize := 2 + rng.IntN(4)
		maxSurge := rng.IntN(3)
		initial := rng.IntN(maxSize + 1)
		workers := 8 + rng.IntN(16)
		deleteDur := time.Duration(1+rng.IntN(10)) * time.Second
		opSeeds := make([]uint64, workers)
		for i := range opSeeds {
			opSeeds[i] = rng.Uint64()
		}
		t.Run(fmt.Sprintf("round %d max %d surge %d initial %d workers %d", round, maxSize, maxSurge, initial, workers), func(t *testing.T) {
			e := newEnv(t, envOptions{fake: []hcloudtest.Option{
				hcloudtest.WithActionDuration("delete_server", deleteDur),
				hcloudtest.WithActionDuration("create_server", time.Second),
			}})
			p := scaled(t, e, "workers", 0, maxSize, initial)
			ctx := t.Context()
			bound := maxSize + maxSurge
			var initialIDs []string
			for _, in := range p.Instances() {
				initialIDs = append(initialIDs, in.ID)
			}

			check := func() {
				p.mu.Lock()
				snap := p.viewLocked()
				got := p.targetLocked(snap) + p.deletesInFlightLocked(snap)
				p.mu.Unlock()
				if got > bound {
					t.Errorf("target + deletes in flight = %d; max %d + surge %d", got, maxSize, maxSurge)
				}
				if n := len(e.servers("workers")); n > bound {
					t.Errorf("%d servers exist; max %d + surge %d", n, maxSize, maxSurge)
				}
			}
			stop := make(chan struct{})
			var bg sync.WaitGroup
			bg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						check()
						e.clock.Step(100 * time.Millisecond)
						time.Sleep(time.Millisecond)
					}
				}
			})

			var (
				mu    sync.Mutex
				names = map[int64]map[string]bool{} // replaces -> names returned
			)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range workers {
				r := rand.New(rand.NewPCG(opSeeds[w], uint64(w)))
				wg.Go(func() {
					<-start
					for range 1 + r.IntN(3) {
						time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
						switch op := r.IntN(10); {
						case op < 5:
							// Pairs of workers share a replaced server.
							replaces := int64(1000 + w/2)
							name, err := p.Surge(ctx, replaces, maxSurge)
							if err != nil && !errors.Is(err, ErrAboveMax) {
								t.Errorf("Surge(%d) = %v", replaces, err)
							}
							if err == nil {
								mu.Lock()
								if names[replaces] == nil {
									names[replaces] = map[string]bool{}
								}
								names[replaces][name] = true
								mu.Unlock()
							}
						case op < 8:
							if err := p.IncreaseSize(ctx, 1+r.IntN(2)); err != nil && !errors.Is(err, ErrAboveMax) {
								t.Errorf("IncreaseSize() = %v", err)
							}
						default:
							if len(initialIDs) > 0 {
								_ = p.DeleteInstances(ctx, []string{initialIDs[r.IntN(len(initialIDs))]})
							}
						}
						check()
					}
				})
			}
			close(start)
			wg.Wait()
			close(stop)
			bg.Wait()
			check()
			e.settle(p)
			check()

			for replaces, set := range names {
				if len(set) != 1 {
					t.Errorf("Surge(%d) returned %d names %v; want one", replaces, len(set), set)
				}
			}
			labelled := map[int64]int{}
			for _, s := range e.servers("workers") {
				if v := s.Labels[config.LabelReplaces]; v != "" {
					var id int64
					if _, err := fmt.Sscan(v, &id); err != nil {
						t.Fatal(err)
					}
					labelled[id]++
					if !names[id][s.Name] {
						t.Errorf("server %s labelled %s=%s was not returned by Surge(%d)", s.Name, config.LabelReplaces, v, id)
					}
				}
			}
			for id, n := range labelled {
				if n != 1 {
					t.Errorf("%d servers replace %d; want 1", n, id)
				}
			}
			for _, in := range p.Instances() {
				if in.Replaces != 0 && !names[in.Replaces][in.Name] {
					t.Errorf("instance %+v: Replaces not from a Surge that returned its name", in)
				}
			}
		})
	}
}
