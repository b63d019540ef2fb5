package hcloudscale_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// Scoping holds both ways: a cluster without a name does not count, map,
// delete or report the servers of a named cluster that share its pool
// name, as during a migration to clusterName.
func TestUnnamedClusterLeavesNamedClustersServersAlone(t *testing.T) {
	p := newProject(t)
	add := func(name string, labels map[string]string) int64 {
		t.Helper()
		id, err := p.api.AddServer(hcloudtest.ServerInfo{Name: name, ServerType: "cpx21", Location: "fsn1",
			Status: hcloud.ServerStatusRunning, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	ours := add("workers-1", map[string]string{config.LabelNodeGroup: "workers"})
	prod := add("workers-2", map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"})

	cc := healthyClusterConfig()
	delete(cc, "clusterName")
	c := newCluster(t, p.load(t, cc, nil, []string{"1:5:cpx21:fsn1:workers"}))
	ctx := context.Background()
	workers := c.Pool("workers")

	if got := workers.TargetSize(); got != 1 {
		t.Errorf("TargetSize = %d; want 1 (only the unlabelled server)", got)
	}
	var ids []int64
	for _, in := range workers.Instances() {
		ids = append(ids, in.ServerID)
	}
	if !slices.Equal(ids, []int64{ours}) {
		t.Errorf("Instances are servers %v; want only %d", ids, ours)
	}
	prodID := "hcloud://" + itoa(prod)
	if got := c.PoolForNode(prodID, "workers-2"); got != nil {
		t.Errorf("PoolForNode(%s) = pool %q; want none", prodID, got.Name())
	}
	if got := c.PoolForNode("", "workers-2"); got != nil {
		t.Errorf("PoolForNode by name workers-2 = pool %q; want none", got.Name())
	}
	if got := c.PoolForNode("hcloud://"+itoa(ours), "workers-1"); got != workers {
		t.Errorf("PoolForNode of our server = %v; want workers", got)
	}
	// HasServer answers whether the server exists, which it does; it is
	// not counted as the pool's.
	if ok, err := c.HasServer(ctx, prodID); err != nil || !ok {
		t.Errorf("HasServer(%s) = %v, %v; want true", prodID, ok, err)
	}
	if err := workers.DeleteInstances(ctx, []string{prodID}); !errors.Is(err, pool.ErrNotInPool) {
		t.Errorf("DeleteInstances of the named cluster's server = %v; want ErrNotInPool", err)
	}
	if err := workers.ForceDeleteInstances(ctx, []string{"workers-2"}); !errors.Is(err, pool.ErrNotInPool) {
		t.Errorf("ForceDeleteInstances by name of the named cluster's server = %v; want ErrNotInPool", err)
	}
	if n := p.api.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests; want none", n)
	}
	st := workers.Status()
	if st.Running != 1 || st.Target != 1 {
		t.Errorf("Status running %d, target %d; want 1 and 1", st.Running, st.Target)
	}
	servers, err := p.api.Servers(config.LabelNodeGroup + "=workers")
	if err != nil || len(servers) != 2 {
		t.Errorf("fake holds %d servers of pool workers (%v); want both still there", len(servers), err)
	}
}
