package hcloudscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale"
)

// After a scale-down the autoscaler still holds the deleted server's
// instance (its instances cache) and its Node, and asks for their node
// group every loop: the answer stays the pool for a while, not "none".
func TestPoolForNodeOfAServerJustDeleted(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	workers := c.Pool("workers")
	if err := workers.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	servers := poolServers(t, p.api, "workers")
	gone, kept := servers[0], servers[1]
	if err := workers.DeleteInstances(ctx, []string{"hcloud://" + itoa(gone.ID)}); err != nil {
		t.Fatalf("DeleteInstances: %v", err)
	}
	waitSettled(t, c, p)
	if n := len(poolServers(t, p.api, "workers")); n != 1 {
		t.Fatalf("%d servers after deleting one of two", n)
	}
	for _, node := range [][2]string{{"hcloud://" + itoa(gone.ID), ""}, {"hcloud://" + itoa(gone.ID), "hcloud://" + itoa(gone.ID)}, {"", gone.Name}} {
		if got := c.PoolForNode(node[0], node[1]); got != workers {
			t.Errorf("PoolForNode(%q, %q) of the server just deleted = %v; want workers", node[0], node[1], got)
		}
	}
	if got := c.PoolForNode("hcloud://"+itoa(kept.ID), ""); got != workers {
		t.Errorf("PoolForNode of the server kept = %v; want workers", got)
	}
	if got := c.PoolForNode("hcloud://"+itoa(gone.ID+1000), ""); got != nil {
		t.Errorf("PoolForNode of a server never seen = %v; want none", got)
	}
	if n := workers.TargetSize(); n != 1 {
		t.Errorf("target %d after the delete; want 1 (the departed server counts nowhere)", n)
	}
}
