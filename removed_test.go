package hcloudscale_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/pool"
)

// A pool removed from the configuration while no process ran (or before a
// restart) keeps its servers: the next New must keep them as a removed
// pool, so that the autoscaler can scale them down, and say so.
func TestNewKeepsServersOfARemovedPool(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	first := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	if err := first.Pool("workers").IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, first, p)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The restart: the configuration has no workers any more.
	cc := healthyClusterConfig()
	delete(cc["nodeConfigs"].(map[string]any), "workers")
	c := newCluster(t, p.load(t, cc, nil, healthyNodes[1:]), hcloudscale.WithListTTL(time.Millisecond))
	if diff := cmp.Diff([]string{"arm", "dedicated", "workers (removed)"}, poolNames(c)); diff != "" {
		t.Fatalf("pools after a restart without workers (-want +got):\n%s", diff)
	}
	if got := c.RemovedPools(); len(got) != 1 || got[0].Name() != "workers" {
		t.Errorf("RemovedPools() = %v; want workers", got)
	}
	if !slices.ContainsFunc(c.Warnings(), func(w string) bool {
		return strings.Contains(w, `pool "workers" is not in the configuration but has 2 server(s)`) && strings.Contains(w, "kept as a removed pool")
	}) {
		t.Errorf("no warning names the removed pool: %q", c.Warnings())
	}
	workers := c.Pool("workers")
	if n := workers.TargetSize(); n != 2 || workers.MinSize() != 0 || workers.MaxSize() != 0 {
		t.Errorf("removed pool: target %d, min %d, max %d; want 2, 0, 0", n, workers.MinSize(), workers.MaxSize())
	}
	if err := workers.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrRemoved) {
		t.Errorf("IncreaseSize of the removed pool = %v; want ErrRemoved", err)
	}
	servers := poolServers(t, p.api, "workers")
	if got := c.PoolForNode("hcloud://"+itoa(servers[0].ID), ""); got != workers {
		t.Errorf("PoolForNode of a removed pool's server = %v; want the removed pool", got)
	}
	if err := workers.DeleteInstances(ctx, ids(workers)); err != nil {
		t.Fatalf("DeleteInstances of the removed pool: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Pool("workers") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("removed pool still there: %v", poolNames(c))
		}
		_ = c.Refresh(ctx)
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(poolServers(t, p.api, "workers")); n != 0 {
		t.Errorf("%d servers of the removed pool left", n)
	}
}

// Without a cluster name the listing covers every autoscaled server of the
// project, which may be another cluster's: they are named, not adopted.
func TestNewLeavesUnscopedServersOfUnknownPoolsAlone(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	cc := healthyClusterConfig()
	delete(cc, "clusterName")
	first := newCluster(t, p.load(t, cc, nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	if err := first.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, first, p)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	delete(cc["nodeConfigs"].(map[string]any), "workers")
	c := newCluster(t, p.load(t, cc, nil, healthyNodes[1:]))
	if c.Pool("workers") != nil {
		t.Errorf("a pool of unknown scope was adopted: %v", poolNames(c))
	}
	if !slices.ContainsFunc(c.Warnings(), func(w string) bool {
		return strings.Contains(w, `pool "workers" is not in the configuration`) && strings.Contains(w, "left alone")
	}) {
		t.Errorf("no warning names the unknown pool's servers: %q", c.Warnings())
	}
}
