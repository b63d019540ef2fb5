package hcloudscale_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

// minOfferingsCluster runs workers (min 3, max 6) on cpx21 in fsn1, then
// cx33 in nbg1, then cpx31 in hel1.
func minOfferingsCluster(t *testing.T, p *project) *hcloudscale.Cluster {
	t.Helper()
	cc := healthyClusterConfig()
	workers := cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)
	delete(workers, "placementGroup")
	workers["offerings"] = []map[string]string{{"serverType": "cx33", "location": "nbg1"}, {"serverType": "cpx31", "location": "hel1"}}
	return newCluster(t, p.load(t, cc, nil, []string{"3:6:cpx21:fsn1:workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"}),
		hcloudscale.WithListTTL(time.Millisecond))
}

// TestOfferingsMinHeldAcrossGroups scales the pool's offerings to a random
// split of 3 to 6 servers, then scales down as the autoscaler does: its
// scale-down plans, per node group, every node above the group's MinSize
// (core/scaledown/unneeded/nodes.go verifyMinSize), drains them and then
// calls DeleteNodes of each group, at once. Invariant: the groups' MinSize
// add up to the pool's min (so the plan never takes the pool below it,
// and no node is drained for a delete that is then refused), no MinSize
// is above its MaxSize, and every planned delete succeeds.
func TestOfferingsMinHeldAcrossGroups(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for round := range 3 {
		p := newProject(t, fastActions())
		ctx := context.Background()
		c := minOfferingsCluster(t, p)
		groups := c.Pool("workers").Family()
		for range 3 + rng.IntN(4) {
			if err := groups[rng.IntN(len(groups))].IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		waitSettled(t, c, p)
		sum, plan := 0, make([][]string, len(groups))
		for i, g := range groups {
			minSize, maxSize, target := g.MinSize(), g.MaxSize(), g.TargetSize()
			if minSize > maxSize {
				t.Errorf("round %d: %s: MinSize %d above MaxSize %d (seed %d)", round, g.Name(), minSize, maxSize, seed)
			}
			sum += minSize
			if n := target - minSize; n > 0 {
				plan[i] = instanceIDs(g)[:n]
			}
		}
		if sum != 3 {
			t.Errorf("round %d: the groups' MinSize add up to %d; want the pool's min 3 (seed %d)", round, sum, seed)
		}
		var wg sync.WaitGroup
		for i, ids := range plan {
			if len(ids) == 0 {
				continue
			}
			wg.Go(func() {
				if err := groups[i].DeleteInstances(ctx, ids); err != nil {
					t.Errorf("round %d: deleting %d of %s above its MinSize: %v (seed %d)", round, len(ids), groups[i].Name(), err, seed)
				}
			})
		}
		wg.Wait()
		total := 0
		for _, g := range groups {
			total += g.TargetSize()
		}
		if total < 3 {
			t.Errorf("round %d: the pool is at %d after the scale-down; want at least its min 3 (seed %d)", round, total, seed)
		}
	}
}

// TestOfferingsReloadNewFirst makes a later offering the pool's first by
// Reconfigure (the --nodes type and location changed to it): its servers
// are the first group's now, as they would be after a restart, not those
// of its old group, which is removed; a removed group would have the
// autoscaler replace them, as unneeded there and missing here.
func TestOfferingsReloadNewFirst(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := offeringsCluster(t, p)
	second := c.Pool("workers@cx33-nbg1")
	if err := second.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	cfg := *c.Config()
	cfg.Pools = append([]config.Pool(nil), cfg.Pools...)
	w := &cfg.Pools[0]
	w.ServerType, w.Location = "cx33", "nbg1"
	w.Offerings = []config.Offering{{ServerType: "cx33", Location: "nbg1"}, {ServerType: "cpx21", Location: "fsn1"}, {ServerType: "cpx31", Location: "hel1"}}
	if err := c.Reconfigure(ctx, &cfg); err != nil {
		t.Fatal(err)
	}
	first := c.Pool("workers")
	if first.TargetSize() != 2 || second.TargetSize() != 0 {
		t.Errorf("targets: workers %d, old workers@cx33-nbg1 %d (removed %v); want 2 and 0", first.TargetSize(), second.TargetSize(), second.Removed())
	}
	for _, in := range first.Instances() {
		if got := c.PoolForNode(in.ID, ""); got != first {
			t.Errorf("PoolForNode(%s) = %s; want workers", in.ID, poolName(got))
		}
	}
	if got := first.MinSize() + second.MinSize() + c.Pool("workers@cpx21-fsn1").MinSize(); got != 1 {
		t.Errorf("MinSize adds up to %d; want the pool's min 1", got)
	}
}

// TestOfferingsBoundsUnderReloads scales the pool's offerings up and down
// and reads their bounds from several goroutines at once, in random order,
// while reloads reorder the offerings and take one out and back in.
// Invariants: nothing deadlocks, and once settled every server of the
// pool is counted by exactly one group, there are at most the pool's max,
// and no group reports a MinSize above its MaxSize (two calls read two
// instants, so they are compared settled). (A sum of
// targets read group by group while others change is no instant's sum,
// so the max is checked settled; TestOfferingsMaxUnderConcurrency checks
// it while increases run.)
func TestOfferingsBoundsUnderReloads(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := minOfferingsCluster(t, p)
	seed := time.Now().UnixNano()
	a, b, d := config.Offering{ServerType: "cpx21", Location: "fsn1"}, config.Offering{ServerType: "cx33", Location: "nbg1"}, config.Offering{ServerType: "cpx31", Location: "hel1"}
	orders := [][]config.Offering{{a, b, d}, {a, d, b}, {a, d}, {a, b}}
	family := func() []*pool.Pool { return c.Pool("workers").Family() }
	total := func() int {
		n := 0
		for _, g := range family() {
			n += g.TargetSize()
		}
		return n
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		defer close(stop)
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		for range 12 {
			cfg := *c.Config()
			cfg.Pools = append([]config.Pool(nil), cfg.Pools...)
			cfg.Pools[0].Offerings = orders[rng.IntN(len(orders))]
			if err := c.Reconfigure(ctx, &cfg); err != nil {
				t.Errorf("Reconfigure: %v", err)
			}
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
	})
	for w := range 4 {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				gs := family()
				g := gs[rng.IntN(len(gs))]
				switch rng.IntN(4) {
				case 0:
					_ = g.IncreaseSize(ctx, 1+rng.IntN(2))
				case 1:
					if ids := instanceIDs(g); len(ids) > 0 {
						_ = g.DeleteInstances(ctx, ids[rng.IntN(len(ids)):][:1])
					}
				case 2:
					_ = c.Refresh(ctx)
				default:
					_, _ = g.MinSize(), g.MaxSize()
				}
			}
		})
	}
	wg.Wait()
	waitSettled(t, c, p)
	servers, err := p.api.Client().Server.AllWithOpts(ctx, hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: config.LabelNodeGroup + "=workers"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := total(); n != len(servers) || n > 6 {
		t.Errorf("settled at target %d with %d servers; want the same, at most 6 (seed %d)", n, len(servers), seed)
	}
	for _, g := range family() {
		if minSize, maxSize := g.MinSize(), g.MaxSize(); minSize > maxSize {
			t.Errorf("%s: MinSize %d above MaxSize %d (seed %d)", g.Name(), minSize, maxSize, seed)
		}
	}
}

// TestOfferingsMinNotHeldByFailedCreates sells the first offering out
// while the second holds the pool's min: the first's failed creates,
// placeholders the autoscaler deletes, hold no capacity, so they take no
// share of the min and a delete in the second that would leave fewer
// healthy servers than the min is refused.
func TestOfferingsMinNotHeldByFailedCreates(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := minOfferingsCluster(t, p)
	first, second := c.Pool("workers"), c.Pool("workers@cx33-nbg1")
	if err := second.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	p.api.SetUnavailable("cpx21", "fsn1", true)
	if err := first.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed := 0; failed < 2; {
		failed = 0
		for _, in := range first.Instances() {
			if in.Error != nil {
				failed++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d failed creates in the first offering; want 2", failed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := second.MinSize(); got != 3 {
		t.Errorf("MinSize of the second = %d; want the pool's min 3, which only its servers hold", got)
	}
	if err := second.DeleteInstances(ctx, instanceIDs(second)[:1]); !errors.Is(err, pool.ErrBelowMin) {
		t.Errorf("deleting one of the 3 healthy servers = %v; want ErrBelowMin", err)
	}
}
