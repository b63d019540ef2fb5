package hcloudscale_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hcloudscale/hcloudscale"
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
