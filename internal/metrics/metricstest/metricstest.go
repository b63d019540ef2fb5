// Package metricstest reads hcloudscale's metrics back in tests.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge returns the value of the gauge name{pool=pool} that g gathers, -1
// when there is none.
func Gauge(t testing.TB, g prometheus.Gatherer, name, pool string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == pool {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
