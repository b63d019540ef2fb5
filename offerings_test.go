package hcloudscale_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

// offeringsCluster runs the healthy configuration with workers (max 6)
// on cpx21 in fsn1, then cx33 in nbg1, then cpx31 in hel1.
func offeringsCluster(t *testing.T, p *project) *hcloudscale.Cluster {
	t.Helper()
	cc := healthyClusterConfig()
	workers := cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)
	delete(workers, "placementGroup")
	workers["offerings"] = []map[string]string{{"serverType": "cx33", "location": "nbg1"}, {"serverType": "cpx31", "location": "hel1"}}
	return newCluster(t, p.load(t, cc, nil, []string{"1:6:cpx21:fsn1:workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"}),
		hcloudscale.WithListTTL(time.Millisecond))
}

// TestOfferingsAreNodeGroups checks that each offering is a node group of
// its own: its ID, its servers' type and location, its template and
// price, and that a server maps back to its offering's group.
func TestOfferingsAreNodeGroups(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := offeringsCluster(t, p)
	var ids []string
	for _, g := range c.Pools() {
		ids = append(ids, g.Name())
	}
	if diff := cmp.Diff([]string{"workers", "workers@cx33-nbg1", "workers@cpx31-hel1", "arm", "dedicated"}, ids); diff != "" {
		t.Fatalf("node groups (-want +got):\n%s", diff)
	}
	second := c.Pool("workers@cx33-nbg1")
	if err := second.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	servers, err := p.api.Client().Server.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range servers {
		if s.Labels[config.LabelNodeGroup] != "workers" {
			continue
		}
		n++
		if s.ServerType.Name != "cx33" || s.Location.Name != "nbg1" {
			t.Errorf("server %s is %s in %s; want cx33 in nbg1", s.Name, s.ServerType.Name, s.Location.Name)
		}
		if got := c.PoolForNode("hcloud://"+itoa(s.ID), s.Name); got != second {
			t.Errorf("PoolForNode(%s) = %v; want workers@cx33-nbg1", s.Name, poolName(got))
		}
	}
	if n != 2 || second.TargetSize() != 2 || c.Pool("workers").TargetSize() != 0 {
		t.Errorf("%d servers, targets %d and %d; want 2 in the second offering", n, second.TargetSize(), c.Pool("workers").TargetSize())
	}
	node, err := second.TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := node.Labels; l["node.kubernetes.io/instance-type"] != "cx33" || l["topology.kubernetes.io/zone"] != "nbg1-dc3" || l[config.LabelNodeGroup] != "workers" {
		t.Errorf("template labels %v; want cx33, zone nbg1-dc3 and the pool's label", l)
	}
	if cpu := node.Status.Capacity.Cpu().Value(); cpu != 4 {
		t.Errorf("template CPU %d; want cx33's 4", cpu)
	}
	if got := c.PoolForTemplateNode("template-node-for-workers@cx33-nbg1-123", mapWith(node.Labels, hcloudscale.LabelTemplateNode, "true")); got != second {
		t.Errorf("PoolForTemplateNode = %v; want workers@cx33-nbg1", poolName(got))
	}
	hour := time.Now()
	p1, err1 := c.Pool("workers").Price(hour, hour.Add(time.Hour))
	p2, err2 := second.Price(hour, hour.Add(time.Hour))
	if err := errors.Join(err1, err2); err != nil || p1 <= 0 || p2 <= 0 || p1 == p2 {
		t.Errorf("prices %v and %v (%v); want each offering's own, positive", p1, p2, err)
	}
}

// TestOfferingsShareBounds checks the pool-wide min and max: the first
// available offering carries the min, each reports the max less what the
// others hold, and a sold-out offering reports its target as max.
func TestOfferingsShareBounds(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := offeringsCluster(t, p)
	first, second, third := c.Pool("workers"), c.Pool("workers@cx33-nbg1"), c.Pool("workers@cpx31-hel1")
	type bounds struct{ Min, Max int }
	get := func() []bounds {
		return []bounds{{first.MinSize(), first.MaxSize()}, {second.MinSize(), second.MaxSize()}, {third.MinSize(), third.MaxSize()}}
	}
	if diff := cmp.Diff([]bounds{{1, 6}, {0, 6}, {0, 6}}, get()); diff != "" {
		t.Errorf("bounds at 0 (-want +got):\n%s", diff)
	}
	if err := second.IncreaseSize(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bounds{{0, 2}, {1, 6}, {0, 2}}, get()); diff != "" {
		t.Errorf("bounds with 4 in the second (-want +got):\n%s", diff)
	}
	if err := third.IncreaseSize(ctx, 3); !errors.Is(err, pool.ErrAboveMax) {
		t.Errorf("IncreaseSize(3) of the third = %v; want ErrAboveMax", err)
	}
	c.Offerings().MarkUnavailable(pool.UnavailableError{ServerType: "cpx21", Location: "fsn1", Code: "resource_unavailable"}, time.Hour)
	if diff := cmp.Diff([]bounds{{0, 0}, {1, 6}, {0, 2}}, get()); diff != "" {
		t.Errorf("bounds with the first sold out (-want +got):\n%s", diff)
	}
	waitSettled(t, c, p)
	if err := second.DeleteInstances(ctx, instanceIDs(second)[:3]); err != nil {
		t.Fatal(err)
	}
	if err := second.DeleteInstances(ctx, instanceIDs(second)); !errors.Is(err, pool.ErrBelowMin) {
		t.Errorf("deleting the pool's last server = %v; want ErrBelowMin", err)
	}
}

// TestOfferingsMaxUnderConcurrency scales the offerings up from many
// goroutines at once in random order, then deletes at random, in rounds.
// Invariant: the pool's servers and claims across all offerings never
// exceed its max. Within a round of increases every target only grows,
// so a sum read group by group is at most the true sum at its end.
func TestOfferingsMaxUnderConcurrency(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := offeringsCluster(t, p)
	groups := c.Pool("workers").Family()
	total := func() int {
		n := 0
		for _, g := range groups {
			n += g.TargetSize()
		}
		return n
	}
	seed := time.Now().UnixNano()
	var worst atomic.Int64
	for round := range 4 {
		var wg sync.WaitGroup
		for w := range 8 {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(round*8+w)))
			wg.Go(func() {
				for range 5 {
					_ = groups[rng.IntN(len(groups))].IncreaseSize(ctx, 1+rng.IntN(3))
					if n := int64(total()); n > worst.Load() {
						worst.Store(n)
					}
				}
			})
		}
		wg.Wait()
		if round%2 == 1 {
			waitSettled(t, c, p)
		}
		for w := range 8 {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(100+round*8+w)))
			wg.Go(func() {
				g := groups[rng.IntN(len(groups))]
				if ids := instanceIDs(g); len(ids) > 0 {
					_ = g.DeleteInstances(ctx, ids[rng.IntN(len(ids)):][:1])
				}
			})
		}
		wg.Wait()
	}
	if w := worst.Load(); w > 6 || w < 5 {
		t.Errorf("the pool's target reached %d; want up to its max 6 and never more (seed %d)", w, seed)
	}
	waitSettled(t, c, p)
	servers, err := p.api.Client().Server.AllWithOpts(ctx, hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: config.LabelNodeGroup + "=workers"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := total(); n > 6 || len(servers) > 6 || n != len(servers) {
		t.Errorf("settled at target %d with %d servers; want the same, at most 6 (seed %d)", n, len(servers), seed)
	}
}

func instanceIDs(p *pool.Pool) []string {
	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	return ids
}

func poolName(p *pool.Pool) string {
	if p == nil {
		return "<nil>"
	}
	return p.Name()
}

func mapWith(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// TestOfferingsReload takes an offering out of the list and puts it back
// by Reconfigure: its group keeps its servers while removed (no
// scale-up, max at its size) and is configured again when it comes back.
func TestOfferingsReload(t *testing.T) {
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
	cfg.Pools[0].Offerings = []config.Offering{{ServerType: "cpx21", Location: "fsn1"}, {ServerType: "cpx31", Location: "hel1"}}
	if err := c.Reconfigure(ctx, &cfg); err != nil {
		t.Fatal(err)
	}
	if !second.Removed() || second.TargetSize() != 2 || second.MaxSize() != 2 || c.Pool("workers").TargetSize() != 0 {
		t.Errorf("taken out: removed %v, target %d, max %d, first's target %d; want removed, 2, 2, 0",
			second.Removed(), second.TargetSize(), second.MaxSize(), c.Pool("workers").TargetSize())
	}
	if err := second.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrRemoved) {
		t.Errorf("IncreaseSize of a removed offering = %v; want ErrRemoved", err)
	}
	if got := c.Pool("workers@cpx31-hel1").MaxSize(); got != 4 {
		t.Errorf("max of the third = %d; want 6 less the removed group's 2", got)
	}
	cfg.Pools[0].Offerings = append(cfg.Pools[0].Offerings, config.Offering{ServerType: "cx33", Location: "nbg1"})
	if err := c.Reconfigure(ctx, &cfg); err != nil {
		t.Fatal(err)
	}
	if second.Removed() || c.Pool("workers@cx33-nbg1") != second || second.TargetSize() != 2 {
		t.Errorf("back: removed %v, target %d; want the same group configured again with its 2", second.Removed(), second.TargetSize())
	}
	var ids []string
	for _, g := range c.Pool("workers").Family() {
		ids = append(ids, g.Name())
	}
	if diff := cmp.Diff([]string{"workers", "workers@cpx31-hel1", "workers@cx33-nbg1"}, ids); diff != "" {
		t.Errorf("family in the new order (-want +got):\n%s", diff)
	}
}
