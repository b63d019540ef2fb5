package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

const testGrace = time.Minute

func spreadConfig(name string, maxSize int) config.Pool {
	cfg := poolConfig(name, 0, maxSize)
	cfg.SpreadGroups = true
	return cfg
}

func (e *env) newSpreadPool(cfg config.Pool, opts ...Option) *Pool {
	e.t.Helper()
	deps := e.deps(cfg)
	deps.PlacementGroups = &e.client.PlacementGroup
	return e.newPoolWith(cfg, deps, append([]Option{WithSpreadGrace(testGrace)}, opts...)...)
}

// groupFill returns the members per placement group labelled for pool,
// from the API's answer.
func (e *env) groupFill(pool string) map[string]int {
	e.t.Helper()
	groups, err := e.client.PlacementGroup.AllWithOpts(context.Background(), hcloud.PlacementGroupListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: config.LabelSpreadPool + "=" + pool},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, g := range groups {
		out[g.Name] = len(g.Servers)
	}
	return out
}

// sweepUntil refreshes the listing and sweeps, the clock moving on by the
// grace each time, until no group of pool is left.
func (e *env) sweepUntilGone(p *Pool) {
	e.t.Helper()
	e.eventually("the empty spread groups to be deleted", 0, func() bool {
		e.clock.Step(testGrace)
		if _, err := e.cache.Refresh(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		p.SweepSpreadGroups()
		return len(e.groupFill(p.Name())) == 0
	})
}

func TestSpreadGroupsPastTen(t *testing.T) {
	e := newEnv(t, envOptions{})
	foreign, err := e.fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "by-hand", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.newSpreadPool(spreadConfig("workers", 30))
	if err := p.IncreaseSize(t.Context(), 25); err != nil {
		t.Fatalf("IncreaseSize(25) error: %v", err)
	}
	e.settle(p)
	want := map[string]int{"workers-spread-1": 10, "workers-spread-2": 10, "workers-spread-3": 5}
	if got := e.groupFill("workers"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spread groups = %v; want %v", got, want)
	}
	if got := countStates(p.Instances()); got["running"] != 25 {
		t.Errorf("instances = %v; want 25 running, no failed create", got)
	}
	if n := e.fake.Count("POST /placement_groups"); n != 3 {
		t.Errorf("%d group creates; want 3", n)
	}

	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	if err := p.DeleteInstances(t.Context(), ids); err != nil {
		t.Fatalf("DeleteInstances error: %v", err)
	}
	e.settle(p)
	e.sweepUntilGone(p)
	if pg, _, err := e.client.PlacementGroup.GetByID(t.Context(), foreign); err != nil || pg == nil {
		t.Errorf("the group made by hand = %v, %v; want it kept", pg, err)
	}
}

func TestSpreadGroupsFoundAgainAfterRestart(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.newSpreadPool(spreadConfig("workers", 30))
	if err := first.IncreaseSize(t.Context(), 12); err != nil {
		t.Fatal(err)
	}
	e.settle(first)

	// A new process: a new cache and pool over the same project.
	e.cache = e.newCache()
	if _, err := e.cache.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := e.newSpreadPool(spreadConfig("workers", 30))
	if err := second.IncreaseSize(t.Context(), 9); err != nil {
		t.Fatal(err)
	}
	e.settle(second)
	want := map[string]int{"workers-spread-1": 10, "workers-spread-2": 10, "workers-spread-3": 1}
	if got := e.groupFill("workers"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spread groups after a restart = %v; want %v", got, want)
	}
}

func TestSpreadGroupLimitIsAnErrorClassWithAMetric(t *testing.T) {
	e := newEnv(t, envOptions{})
	for i := range hcloudtest.MaxPlacementGroups {
		if _, err := e.fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "other-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	p := e.newSpreadPool(spreadConfig("workers", 5), WithRegisterer(reg))
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	in := p.Instances()
	if len(in) != 1 || in[0].Error == nil || in[0].Error.Code != CodePlacementGroupLimit || in[0].Error.Class != OutOfResources {
		t.Fatalf("instances = %+v; want one failed claim, OutOfResources %s", in, CodePlacementGroupLimit)
	}
	if got := testutil.ToFloat64(p.metrics.PlacementGroupLimit.WithLabelValues("workers")); got != 1 {
		t.Errorf("placement group limit counter = %v; want 1", got)
	}
	err := p.IncreaseSize(t.Context(), 1)
	var u *UnavailableError
	if !errors.As(err, &u) || u.Code != CodePlacementGroupLimit {
		t.Errorf("IncreaseSize at the limit = %v; want it to fail fast with %s", err, CodePlacementGroupLimit)
	}
}

// TestSpreadGroupsUnderRandomInterleavings runs concurrent scale-ups,
// deletes and restarts of a spread pool, seeded. Invariants: no create
// fails for a full group (the fake refuses an eleventh server), no group
// holds more than ten, and once the pool is empty every group it made is
// deleted. SPREAD_SEEDS sets the number of seeds (default 3).
func TestSpreadGroupsUnderRandomInterleavings(t *testing.T) {
	seeds := 3
	if v, err := strconv.Atoi(os.Getenv("SPREAD_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	for seed := range seeds {
		t.Run("seed="+strconv.Itoa(seed), func(t *testing.T) { spreadRun(t, uint64(seed)) })
	}
}

func spreadRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 47))
	e := newEnv(t, envOptions{})
	cfg := spreadConfig("workers", 40)
	p := e.newSpreadPool(cfg)
	for round := range 6 {
		done := make(chan error, 3)
		n1, n2 := 1+rng.IntN(8), 1+rng.IntN(8)
		pick := rand.New(rand.NewPCG(rng.Uint64(), 0))
		go func() { done <- p.IncreaseSize(context.Background(), n1) }()
		go func() { done <- p.IncreaseSize(context.Background(), n2) }()
		go func() {
			var ids []string
			for _, in := range p.Instances() {
				if in.ServerID != 0 && pick.IntN(3) == 0 {
					ids = append(ids, in.ID)
				}
			}
			if len(ids) == 0 {
				done <- nil
				return
			}
			done <- p.DeleteInstances(context.Background(), ids)
		}()
		for range 3 {
			if err := <-done; err != nil && !errors.Is(err, ErrAboveMax) && !errors.Is(err, ErrNotInPool) {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
		}
		e.settle(p)
		checkSpread(t, e, p, seed, round)
		if rng.IntN(3) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
			e.cache = e.newCache()
			if _, err := e.cache.Get(context.Background()); err != nil {
				t.Fatal(err)
			}
			p = e.newSpreadPool(cfg)
		}
	}
	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	if err := p.DeleteInstances(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	e.sweepUntilGone(p)
}

func checkSpread(t *testing.T, e *env, p *Pool, seed uint64, round int) {
	t.Helper()
	for _, in := range p.Instances() {
		if in.Error != nil {
			t.Errorf("seed %d round %d: failed create %s: %s %s", seed, round, in.Name, in.Error.Code, in.Error.Message)
		}
	}
	for name, n := range e.groupFill("workers") {
		if n > MaxSpreadMembers {
			t.Errorf("seed %d round %d: group %s holds %d servers", seed, round, name, n)
		}
	}
	for _, s := range e.servers("workers") {
		if s.PlacementGroup == 0 {
			t.Errorf("seed %d round %d: server %s in no group", seed, round, s.Name)
		}
	}
}

func TestSpreadGroupNameTakenByAForeignGroup(t *testing.T) {
	e := newEnv(t, envOptions{})
	if _, err := e.fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "workers-spread-1", Labels: map[string]string{"team": "a"}}); err != nil {
		t.Fatal(err)
	}
	p := e.newSpreadPool(spreadConfig("workers", 30))
	if err := p.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatalf("IncreaseSize(2) error: %v", err)
	}
	e.settle(p)
	if got := countStates(p.Instances()); got["running"] != 2 {
		t.Errorf("instances = %v; want 2 running", got)
	}
	if n := e.fake.Count("POST /placement_groups"); n > 3 {
		t.Errorf("%d group creates; want a few, not a loop", n)
	}
}

func TestSpreadGroupDeletedByHand(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newSpreadPool(spreadConfig("workers", 30))
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	if err := p.DeleteInstances(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	groups, err := e.client.PlacementGroup.All(t.Context())
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups = %v, %v; want one", groups, err)
	}
	if _, err := e.client.PlacementGroup.Delete(t.Context(), groups[0]); err != nil {
		t.Fatal(err)
	}
	// The first create after the deletion is refused and the groups are
	// listed again; the next scale-up gets a new group.
	for range 2 {
		if err := p.IncreaseSize(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		e.settle(p)
	}
	if got := countStates(p.Instances()); got["running"] != 1 {
		t.Errorf("instances = %v; want 1 running after its group was deleted by hand", got)
	}
}
