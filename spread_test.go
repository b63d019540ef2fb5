package hcloudscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// TestClusterSpreadGroups scales a pool with spreadGroups past ten through
// a Cluster: its servers land in two groups it created, labelled for the
// cluster and the pool.
func TestClusterSpreadGroups(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := spreadCluster(t, p, 12)
	groups, err := p.api.Client().PlacementGroup.AllWithOpts(ctx, hcloud.PlacementGroupListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: config.LabelSpreadPool + "=workers," + config.LabelCluster + "=prod"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var fill []int
	for _, g := range groups {
		fill = append(fill, len(g.Servers))
	}
	if len(fill) != 2 || fill[0]+fill[1] != 12 || fill[0] > 10 || fill[1] > 10 {
		t.Errorf("spread groups hold %v servers; want two groups, 12 servers, at most 10 each", fill)
	}
	if got := c.Pool("workers").SpreadGroups(); len(got) != 2 {
		t.Errorf("SpreadGroups() = %+v; want the two groups", got)
	}
}

// TestClusterSpreadGrace: WithSpreadGrace reaches the pools. With the
// servers deleted, the pool's empty spread group is deleted within seconds of
// refreshes, where the default grace would keep it for ten minutes; a
// group the pool did not create stays.
func TestClusterSpreadGrace(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := spreadCluster(t, p, 2, hcloudscale.WithSpreadGrace(100*time.Millisecond))
	if got := c.Pool("workers").SpreadGroups(); len(got) != 1 || got[0].Servers != 2 {
		t.Fatalf("SpreadGroups() = %+v; want one group of two servers", got)
	}
	var ids []string
	for _, in := range c.Pool("workers").Instances() {
		ids = append(ids, in.ID)
	}
	if err := c.Pool("workers").DeleteInstances(ctx, ids); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(c.Pool("workers").SpreadGroups()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the empty spread group is still there after 10 s with a grace of 100ms: %+v", c.Pool("workers").SpreadGroups())
		}
		if err := c.Refresh(ctx); err != nil {
			t.Logf("Refresh: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	all, err := p.api.Client().PlacementGroup.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != "spread" {
		t.Errorf("placement groups left: %v; want only the one the pool did not create", all)
	}
}

// spreadCluster starts a Cluster whose pool workers (max 20) has
// spreadGroups, scales it to n servers and waits until they run.
func spreadCluster(t *testing.T, p *project, n int, opts ...hcloudscale.Option) *hcloudscale.Cluster {
	t.Helper()
	cc := healthyClusterConfig()
	workers := cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)
	delete(workers, "placementGroup")
	workers["spreadGroups"] = true
	c := newCluster(t, p.load(t, cc, nil, []string{"0:20:cx23:fsn1:workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"}),
		append([]hcloudscale.Option{hcloudscale.WithListTTL(time.Millisecond)}, opts...)...)
	if err := c.Pool("workers").IncreaseSize(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	return c
}
