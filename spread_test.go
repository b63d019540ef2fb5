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
	cc := healthyClusterConfig()
	workers := cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)
	delete(workers, "placementGroup")
	workers["spreadGroups"] = true
	c := newCluster(t, p.load(t, cc, nil, []string{"0:20:cx23:fsn1:workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"}), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Pool("workers").IncreaseSize(ctx, 12); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
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
