package hcloudscale_test

import (
	"context"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/internal/metrics/metricstest"
)

func TestMetrics(t *testing.T) {
	p := newProject(t)
	cfg := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	reg := prometheus.NewPedanticRegistry()
	c := newCluster(t, cfg, hcloudscale.WithRegisterer(reg))

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, name := range []string{
		"hcloud_api_requests_total",
		"hcloudscale_pool_max_size",
		"hcloudscale_api_ratelimit_limit",
		"hcloudscale_api_ratelimit_remaining",
		"hcloudscale_api_pacer_wait_seconds_total",
		"hcloudscale_api_rate_limited_total",
	} {
		if byName[name] == nil {
			t.Errorf("metric %s is not registered", name)
		}
	}
	if got := gaugeValue(byName["hcloudscale_api_ratelimit_limit"]); got != 3600 {
		t.Errorf("hcloudscale_api_ratelimit_limit = %v; want 3600", got)
	}
	rl := c.RateLimit()
	if rl.Remaining <= 0 || rl.Remaining >= 3600 {
		t.Errorf("RateLimit().Remaining = %d; want the fake's budget less the start-up requests", rl.Remaining)
	}
	if got := gaugeValue(byName["hcloudscale_api_ratelimit_remaining"]); int(got) != rl.Remaining {
		t.Errorf("hcloudscale_api_ratelimit_remaining = %v; want %d", got, rl.Remaining)
	}

	// A second Cluster on the same registerer reuses the collectors and
	// takes over the budget metrics; closing it stops them.
	second := newCluster(t, cfg, hcloudscale.WithRegisterer(reg))
	if err := second.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "hcloudscale_api_ratelimit_limit"); err != nil || n != 0 {
		t.Errorf("after the reporting Cluster closed: %d series, %v; want 0", n, err)
	}
}

func gaugeValue(f *dto.MetricFamily) float64 {
	if f == nil || len(f.Metric) == 0 {
		return -1
	}
	return f.Metric[0].GetGauge().GetValue()
}

// TestMetricsBoundsPerOffering checks that each node group of a pool of
// several offerings reports, as hcloudscale_pool_min_size and _max_size,
// what it reports to the autoscaler as MinSize and MaxSize (its share of
// the pool's min, the pool's max less what its other groups hold), as of
// the scrape, and that the pool's configured bounds have series of their
// own under its name.
func TestMetricsBoundsPerOffering(t *testing.T) {
	p := newProject(t, fastActions())
	reg := prometheus.NewPedanticRegistry()
	c := newCluster(t, offeringsConfig(t, p, "cpx21:fsn1", offB, offC), hcloudscale.WithRegisterer(reg), hcloudscale.WithListTTL(time.Millisecond))
	if err := c.Pool("workers@cx33-nbg1").IncreaseSize(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	type bounds struct{ Min, Max float64 }
	want := map[string]bounds{
		// The second holds 4 of the pool's 6 and the min of 1.
		"workers": {0, 2}, "workers@cx33-nbg1": {1, 6}, "workers@cpx31-hel1": {0, 2},
		"arm": {1, 3}, "dedicated": {0, 2},
	}
	got := map[string]bounds{}
	for _, g := range c.Pools() {
		got[g.Name()] = bounds{metricstest.Gauge(t, reg, "hcloudscale_pool_min_size", g.Name()), metricstest.Gauge(t, reg, "hcloudscale_pool_max_size", g.Name())}
		if got[g.Name()] != (bounds{float64(g.MinSize()), float64(g.MaxSize())}) {
			t.Errorf("%s: gauges %v; want MinSize %d, MaxSize %d", g.Name(), got[g.Name()], g.MinSize(), g.MaxSize())
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("node groups' bounds (-want +got):\n%s", diff)
	}
	configured := map[string]bounds{}
	for _, name := range []string{"workers", "workers@cx33-nbg1", "arm"} {
		configured[name] = bounds{metricstest.Gauge(t, reg, "hcloudscale_pool_configured_min_size", name), metricstest.Gauge(t, reg, "hcloudscale_pool_configured_max_size", name)}
	}
	if diff := gocmp.Diff(map[string]bounds{"workers": {1, 6}, "workers@cx33-nbg1": {-1, -1}, "arm": {1, 3}}, configured); diff != "" {
		t.Errorf("configured bounds, per pool only (-want +got):\n%s", diff)
	}
}
