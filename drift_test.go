package hcloudscale_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/pool"
)

// TestDriftMetric changes a pool's cloud-init and labels: its server is
// counted per reason at the next Refresh, and nothing is replaced.
func TestDriftMetric(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithRegisterer(reg), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, p)
	if m := gatherText(t, reg); strings.Contains(m, "hcloudscale_pool_drifted_servers{") {
		t.Errorf("drift before any change:\n%s", m)
	}

	cc := healthyClusterConfig()
	workers := nodeConfig(cc, "workers")
	workers["cloudInit"] = "#cloud-config\n# v2\n"
	workers["serverLabels"] = map[string]string{"tier": "gold"}
	if err := c.Reconfigure(ctx, p.load(t, cc, nil, healthyNodes)); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	m := gatherText(t, reg)
	for _, want := range []string{
		`hcloudscale_pool_drifted_servers{pool="workers",reason="labels"} 1`,
		`hcloudscale_pool_drifted_servers{pool="workers",reason="user_data"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	drift, err := c.Drift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := drift["workers"]; len(d) != 1 || !d[0].Drifted() || len(d[0].Reasons) != 2 || d[0].Reasons[0] != pool.DriftLabels {
		t.Errorf("Drift()[workers] = %+v; want one server, labels and user data", d)
	}
	if n := p.api.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests; drift replaces nothing", n)
	}
}

// TestDriftMetricDuringAScaleUp: a subnet pool's new server is off and not
// on the network until its flow attaches it. A Refresh in between counts it
// in no drift reason: the drift alert does not fire during every scale-up.
func TestDriftMetricDuringAScaleUp(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithRegisterer(reg), hcloudscale.WithListTTL(time.Millisecond))
	attach := p.api.HoldRequest("POST /servers/{id}/actions/attach_to_network", 1)
	defer attach.Release()
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-attach.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("no attach request")
	}
	// A listing now, and the Refresh that computes drift from it.
	if err := c.RefreshNow(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if servers, _ := p.api.Servers("hcloud/node-group=workers"); len(servers) != 1 || len(servers[0].Networks) != 0 {
		t.Fatalf("servers of the pool = %+v; want one, not on the network yet", servers)
	}
	if m := gatherText(t, reg); strings.Contains(m, "hcloudscale_pool_drifted_servers{") {
		t.Errorf("drift while the server is being created:\n%s", m)
	}
	attach.Release()
	waitSettled(t, c, p)
	if m := gatherText(t, reg); strings.Contains(m, "hcloudscale_pool_drifted_servers{") {
		t.Errorf("drift after the server runs:\n%s", m)
	}
}
