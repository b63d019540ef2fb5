package actionwait

import "github.com/hcloudscale/hcloudscale/internal/metrics"

// The options only tests set.

// withMetrics reports to m, for tests that read the collectors.
func withMetrics(m *metrics.Set) Option {
	return func(w *Waiter) { w.metrics = m }
}
