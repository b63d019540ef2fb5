package hcloudscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// TestReloadAddingASubnetRangeChangesNoServer: a pool without a subnet range
// has a node that ran and that someone stopped (to isolate it, say). A
// reload gives the pool a subnet range; the Refreshes after it attach and
// power on nothing: the server stays off, off the network.
func TestReloadAddingASubnetRangeChangesNoServer(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	client := p.api.Client()
	res, _, err := client.Server.Create(ctx, hcloud.ServerCreateOpts{
		Name: "workers-0123456789abcdef", ServerType: &hcloud.ServerType{Name: "cpx21"},
		Image: &hcloud.Image{Name: "ubuntu-24.04"}, Location: &hcloud.Location{Name: "fsn1"},
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Server.ID
	waitStatus := func(want hcloud.ServerStatus) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for s, _ := p.api.ServerByID(id); s.Status != want; s, _ = p.api.ServerByID(id) {
			if time.Now().After(deadline) {
				t.Fatalf("server %d is %s; want %s", id, s.Status, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitStatus(hcloud.ServerStatusRunning)
	if _, _, err := client.Server.Poweroff(ctx, res.Server); err != nil {
		t.Fatal(err)
	}
	waitStatus(hcloud.ServerStatusOff)

	plain := healthyClusterConfig()
	delete(plain, "defaultSubnetIPRange")
	c := newCluster(t, p.load(t, plain, nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Reconfigure(ctx, p.load(t, healthyClusterConfig(), nil, healthyNodes)); err != nil {
		t.Fatal(err)
	}
	if !c.Pool("workers").Config().SubnetIPRange.IsValid() {
		t.Fatal("the reload gave the pool no subnet range")
	}
	p.api.ResetCounts()
	for range 5 {
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitSettled(t, c, p)
	if s, ok := p.api.ServerByID(id); !ok || s.Status != hcloud.ServerStatusOff || len(s.Networks) != 0 {
		t.Errorf("server after the reload = %+v, %v; want it off and off the network", s, ok)
	}
	for _, req := range []string{"POST /servers/{id}/actions/attach_to_network", "POST /servers/{id}/actions/poweron"} {
		if got := p.api.Count(req); got != 0 {
			t.Errorf("%s = %d after the reload; want none", req, got)
		}
	}
}
