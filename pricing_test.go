package hcloudscale_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/hcloudscale/hcloudscale"
)

// TestPodRate checks the rate against the fake's own catalogue: per
// resource, the cheapest pool's half-price per core and per GiB.
func TestPodRate(t *testing.T) {
	p := newProject(t)
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes))
	got, err := c.PodRate(context.Background())
	if err != nil {
		t.Fatalf("PodRate: %v", err)
	}
	types, err := p.api.Client().ServerType.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := hcloudscale.PodRate{PerCore: math.Inf(1), PerGiB: math.Inf(1)}
	pools := map[string]string{"cpx21": "fsn1", "cax11": "nbg1", "ccx13": "hel1"}
	for _, st := range types {
		loc, ok := pools[st.Name]
		if !ok {
			continue
		}
		for _, pr := range st.Pricings {
			if pr.Location.Name != loc {
				continue
			}
			hourly, err := strconv.ParseFloat(pr.Hourly.Net, 64)
			if err != nil {
				t.Fatal(err)
			}
			want.PerCore = min(want.PerCore, hourly/2/float64(st.Cores))
			want.PerGiB = min(want.PerGiB, hourly/2/float64(st.Memory))
		}
	}
	if math.Abs(got.PerCore-want.PerCore) > 1e-9 || math.Abs(got.PerGiB-want.PerGiB) > 1e-9 {
		t.Errorf("PodRate() = %+v; want %+v", got, want)
	}
	if got.PerCore <= 0 || math.IsInf(got.PerCore, 1) {
		t.Errorf("PodRate().PerCore = %v; want a positive price", got.PerCore)
	}
}
