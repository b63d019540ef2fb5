package hcloudscale_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/internal/metrics/metricstest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// TestOfferingsChaos runs scale-ups, deletes, reloads that list, drop,
// reorder or remove the offerings (or the whole pool), sold-out marks,
// refreshes and scrapes of the metrics at once in random order, with a
// restart between rounds. Invariants, checked each time everything has
// settled: the pool never holds more than its max of 6 servers across
// its node groups, removed ones included; every server of the pool is in
// exactly one node group, the one PoolForNode names; the groups' targets
// add up to the servers; and each group's gauges are its bounds, no
// gauge naming a group that is gone. Replay a failure with its seed.
func TestOfferingsChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	p := newProject(t, fastActions())
	ctx := context.Background()
	configs := []*config.Config{
		offeringsConfig(t, p, "cpx21:fsn1", offB, offC),
		offeringsConfig(t, p, "cpx21:fsn1", offC),
		offeringsConfig(t, p, "cpx21:fsn1"),
		offeringsConfig(t, p, "cpx21:fsn1", offC, offB),
		offeringsConfig(t, p, "cx33:nbg1", offC),
		withoutWorkers(t, p),
	}
	offs := []config.Offering{offA, offB, offC}
	reg := prometheus.NewPedanticRegistry()
	start := func(cfg *config.Config) *hcloudscale.Cluster {
		return newCluster(t, cfg, hcloudscale.WithRegisterer(reg), hcloudscale.WithListTTL(time.Millisecond))
	}
	c := start(configs[0])
	for round := range 10 {
		var wg sync.WaitGroup
		for w := range 6 {
			r := rand.New(rand.NewPCG(seed, uint64(1+round*6+w)))
			deletes := round%2 == 1
			wg.Go(func() {
				for range 6 {
					chaosStep(ctx, t, c, r, configs, offs, reg, deletes)
				}
			})
		}
		wg.Wait()
		waitSettled(t, c, p)
		checkOfferingsInvariants(t, c, p, reg, seed)
		if rng.IntN(2) == 0 {
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			c = start(configs[rng.IntN(len(configs))])
			waitSettled(t, c, p)
			checkOfferingsInvariants(t, c, p, reg, seed)
		}
	}
}

// chaosStep does one random thing to c; errors are expected (a refused
// scale-up, a reload racing another) and ignored.
func chaosStep(ctx context.Context, t *testing.T, c *hcloudscale.Cluster, r *rand.Rand, configs []*config.Config, offs []config.Offering, reg prometheus.Gatherer, deletes bool) {
	var groups []*pool.Pool
	for _, g := range c.Pools() {
		if config.PoolOfGroup(g.Name()) == "workers" {
			groups = append(groups, g)
		}
	}
	switch n := r.IntN(10); {
	case (n < 4 || deletes && n == 4) && len(groups) > 0:
		g := groups[r.IntN(len(groups))]
		if !deletes {
			_ = g.IncreaseSize(ctx, 1+r.IntN(3))
		} else if ids := instanceIDs(g); len(ids) > 0 {
			_ = g.DeleteInstances(ctx, ids[r.IntN(len(ids)):][:1])
		}
	case n < 6:
		_ = c.Reconfigure(ctx, configs[r.IntN(len(configs))])
	case n < 7:
		o := offs[r.IntN(len(offs))]
		c.Offerings().MarkUnavailable(pool.UnavailableError{ServerType: o.ServerType, Location: o.Location, Code: "resource_unavailable"}, time.Hour)
	case n < 8:
		_ = c.Refresh(ctx)
	default:
		if _, err := reg.Gather(); err != nil {
			t.Errorf("scrape: %v", err)
		}
	}
}

func checkOfferingsInvariants(t *testing.T, c *hcloudscale.Cluster, p *project, reg prometheus.Gatherer, seed uint64) {
	t.Helper()
	servers, err := p.api.Client().Server.AllWithOpts(context.Background(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: config.LabelNodeGroup + "=workers"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) > 6 {
		t.Errorf("the pool has %d servers; want at most its max 6 (seed %d)", len(servers), seed)
	}
	total := 0
	for _, g := range workersGroups(c) {
		total += g.Target
	}
	if total != len(servers) {
		t.Errorf("the groups %v hold %d; want the pool's %d servers (seed %d)", workersGroups(c), total, len(servers), seed)
	}
	for _, s := range servers {
		g := c.PoolForNode("hcloud://"+itoa(s.ID), "")
		if g == nil {
			t.Errorf("server %s (%s in %s) is in no node group; groups %v (seed %d)", s.Name, s.ServerType.Name, s.Location.Name, workersGroups(c), seed)
		}
	}
	live := map[string]bool{}
	for _, g := range c.Pools() {
		live[g.Name()] = true
		if got := metricstest.Gauge(t, reg, "hcloudscale_pool_max_size", g.Name()); got != float64(g.MaxSize()) {
			t.Errorf("%s: hcloudscale_pool_max_size %v; want MaxSize %d (seed %d)", g.Name(), got, g.MaxSize(), seed)
		}
	}
	for _, name := range []string{"workers", "workers@cx33-nbg1", "workers@cpx31-hel1", "workers@cpx21-fsn1"} {
		if !live[name] && metricstest.Gauge(t, reg, "hcloudscale_pool_max_size", name) != -1 {
			t.Errorf("%s is gone but hcloudscale_pool_max_size still reports it (seed %d)", name, seed)
		}
	}
}
