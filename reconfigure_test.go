package hcloudscale_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

func poolNames(c *hcloudscale.Cluster) []string {
	var out []string
	for _, p := range c.Pools() {
		name := p.Name()
		if p.Removed() {
			name += " (removed)"
		}
		out = append(out, name)
	}
	return out
}

// waitSettled refreshes c until nothing is in flight.
func waitSettled(t *testing.T, c *hcloudscale.Cluster, p *project) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := c.Refresh(context.Background()); err != nil {
			t.Logf("Refresh: %v", err)
		}
		if settled(c, p.api) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v", poolNames(c))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReconfigureAddsChangesAndRemovesPools(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Pool("workers").IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)

	// workers leaves the configuration with two servers, extra is
	// declared in the file alone, dedicated's max goes from 2 to 4.
	cc := healthyClusterConfig()
	nodes := cc["nodeConfigs"].(map[string]any)
	delete(nodes, "workers")
	nodes["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3, "cloudInit": "#cloud-config\n"}
	next := p.load(t, cc, nil, []string{"1:3:cax11:nbg1:arm", "0:4:ccx13:hel1:dedicated"})
	if err := c.Reconfigure(ctx, next); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if diff := cmp.Diff([]string{"arm", "dedicated", "extra", "workers (removed)"}, poolNames(c)); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if c.Config() != next {
		t.Error("Config() is not the configuration applied")
	}
	if got := c.Pool("dedicated").MaxSize(); got != 4 {
		t.Errorf("dedicated max = %d; want 4", got)
	}
	workers := c.Pool("workers")
	if err := workers.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrRemoved) {
		t.Errorf("IncreaseSize of the removed pool = %v; want ErrRemoved", err)
	}
	if n := p.api.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests after removing a pool with servers; want 0", n)
	}
	if got := c.PoolForNode("hcloud://"+itoa(poolServers(t, p.api, "workers")[0].ID), ""); got != workers {
		t.Errorf("PoolForNode of a removed pool's server = %v; want the removed pool", got)
	}
	if err := c.Pool("extra").IncreaseSize(ctx, 2); err != nil {
		t.Fatalf("IncreaseSize of the added pool: %v", err)
	}
	waitSettled(t, c, p)
	for _, s := range poolServers(t, p.api, "extra") {
		if s.ServerType != "cx33" || s.Location != "nbg1" || s.Labels[config.LabelCluster] != "prod" {
			t.Errorf("server %s of the added pool: %s in %s, labels %v", s.Name, s.ServerType, s.Location, s.Labels)
		}
	}

	// The autoscaler deletes the removed pool's nodes; once empty, the
	// pool is gone.
	if err := workers.DeleteInstances(ctx, ids(workers)); err != nil {
		t.Fatalf("DeleteInstances of the removed pool: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Pool("workers") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("removed pool still there: %v", poolNames(c))
		}
		if err := c.Refresh(ctx); err != nil {
			t.Logf("Refresh: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"arm", "dedicated", "extra"}, poolNames(c)); diff != "" {
		t.Errorf("pools after the removed one emptied (-want +got):\n%s", diff)
	}
}

func TestReconfigureRefusesWholeAndChangesNothing(t *testing.T) {
	p := newProject(t)
	ctx := context.Background()
	cfg := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	c := newCluster(t, cfg)

	cc := healthyClusterConfig()
	cc["clusterName"] = "other"
	nodes := cc["nodeConfigs"].(map[string]any)
	nodes["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3, "firewalls": []string{"missing"}}
	nodes["bigger"] = map[string]any{"serverType": "nope", "location": "nbg1", "maxSize": 3}
	err := c.Reconfigure(ctx, p.load(t, cc, nil, []string{"0:9:cpx21:fsn1:workers"}))
	if err == nil {
		t.Fatal("Reconfigure = nil; want errors")
	}
	for _, want := range []string{
		"clusterName: differs from the running configuration; it takes a restart to change",
		`nodeConfigs.extra.firewalls[1]: firewall "missing" does not exist`,
		`nodeConfigs.bigger: server type "nope" does not exist`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Reconfigure error lacks %q:\n%v", want, err)
		}
	}
	cc["clusterName"] = "prod"
	err = c.Reconfigure(ctx, p.load(t, cc, nil, []string{"0:9:cpx21:fsn1:workers"}))
	if err == nil || strings.Contains(err.Error(), "clusterName") {
		t.Fatalf("Reconfigure = %v; want the reference errors alone", err)
	}
	if c.Config() != cfg {
		t.Error("Config() changed after a refused Reconfigure")
	}
	if diff := cmp.Diff([]string{"workers", "arm", "dedicated"}, poolNames(c)); diff != "" {
		t.Errorf("pools after a refused Reconfigure (-want +got):\n%s", diff)
	}
	if got := c.Pool("workers").MaxSize(); got != 5 {
		t.Errorf("workers max after a refused Reconfigure = %d; want 5", got)
	}
}

// TestReconfigureUnderConcurrency switches between two configurations
// while the autoscaler's calls run, under -race: every answer is of one
// configuration or the other.
func TestReconfigureUnderConcurrency(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	a := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	cc := healthyClusterConfig()
	cc["nodeConfigs"].(map[string]any)["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3}
	b := p.load(t, cc, nil, []string{"0:7:cpx21:fsn1:workers", "1:3:cax11:nbg1:arm"})
	c := newCluster(t, a, hcloudscale.WithListTTL(time.Millisecond))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		defer close(stop)
		for i := range 20 {
			cfg := a
			if i%2 == 0 {
				cfg = b
			}
			if err := c.Reconfigure(ctx, cfg); err != nil {
				t.Errorf("Reconfigure: %v", err)
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				names := poolNames(c)
				if !slices.Contains(names, "workers") || len(names) < 3 {
					t.Errorf("pools %v: neither configuration", names)
				}
				if w := c.Pool("workers"); w != nil {
					_ = w.IncreaseSize(ctx, 1)
					_ = w.TargetSize()
				}
				_ = c.PoolForNode("hcloud://1", "")
				_ = c.PoolForTemplateNode("template-node-for-extra-1", map[string]string{hcloudscale.LabelTemplateNode: "true"})
				if err := c.Refresh(ctx); err != nil {
					t.Logf("Refresh: %v", err)
				}
			}
		})
	}
	wg.Wait()
	waitSettled(t, c, p)
	if got := len(poolServers(t, p.api, "workers")); got == 0 || got > 7 {
		t.Errorf("workers has %d servers; want 1..7", got)
	}
}

// fastActions makes the fake's actions finish at once.
func fastActions() hcloudtest.Option { return hcloudtest.WithDefaultActionDuration(0) }

func TestReconfigureAfterCloseAddsNothing(t *testing.T) {
	p := newProject(t)
	ctx := context.Background()
	c, err := hcloudscale.New(ctx, p.load(t, healthyClusterConfig(), nil, healthyNodes), fastClient())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cc := healthyClusterConfig()
	cc["nodeConfigs"].(map[string]any)["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3}
	if err := c.Reconfigure(ctx, p.load(t, cc, nil, healthyNodes)); err == nil || c.Pool("extra") != nil {
		t.Errorf("Reconfigure after Close = %v, pool extra %v; want an error and no pool", err, c.Pool("extra"))
	}
}

// TestReconfigurePublicIPsOfAPool turns a pool's public IPs off in the
// cluster config of a running Cluster: servers created after the change
// have none and are on the network, those before keep theirs.
func TestReconfigurePublicIPsOfAPool(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	// A server without public IPs joins the network in its create
	// request, which cannot choose a subnet: no default range.
	cc := healthyClusterConfig()
	delete(cc, "defaultSubnetIPRange")
	c := newCluster(t, p.load(t, cc, nil, healthyNodes), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)

	workers := cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)
	workers["publicIPv4"], workers["publicIPv6"] = false, false
	if err := c.Reconfigure(ctx, p.load(t, cc, nil, healthyNodes)); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	type addrs struct {
		Public  bool
		Private int
	}
	var got []addrs
	for _, s := range poolServers(t, p.api, "workers") {
		got = append(got, addrs{s.PublicIPv4 != "" && s.PublicIPv6 != "", len(s.Networks)})
	}
	if diff := cmp.Diff([]addrs{{true, 1}, {false, 1}}, got); diff != "" {
		t.Errorf("servers of workers (-want +got):\n%s", diff)
	}
}
