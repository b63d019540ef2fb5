package hcloudscale_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
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
