package lifecycle

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the lifecycle's Prometheus metrics.
type metrics struct {
	nodes   *prometheus.GaugeVec   // by pool, reason, state
	results *prometheus.CounterVec // by pool, result
	surge   *prometheus.GaugeVec   // by pool
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hcloudscale_replacement_nodes",
			Help: "Nodes due for replacement at the last step, by pool, reason and state (start: starting now; blocked: held by a window, budget, max size, pod or pause; in_progress).",
		}, []string{"pool", "reason", "state"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hcloudscale_replacements_total",
			Help: "Replacements by pool and result: started; done (old server deleted); failed (the replacement did not join or was not created); stopped (the drain did not finish, or the replacement went away).",
		}, []string{"pool", "result"}),
		surge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hcloudscale_replacement_surge",
			Help: "Servers a pool has above its max size for replacements (maxSurge), at the last step.",
		}, []string{"pool"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.nodes, m.results, m.surge} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

// results are the values of hcloudscale_replacements_total's result label.
var results = []string{"started", "done", "failed", "stopped"}

func (m *metrics) observe(p *Plan, w *world) {
	m.surge.Reset()
	for i := range w.pools {
		pv := &w.pools[i]
		// Every result of every pool exists from the first step on, at 0:
		// Prometheus' increase() takes a counter first seen at 1 for one
		// that was always 1, so an alert on the first failure needs the 0.
		for _, r := range results {
			m.results.WithLabelValues(pv.name, r)
		}
		if !pv.removed {
			// A pool's surge counts across its offerings, reported on
			// its first offering's group (the pool's name); 0 on the
			// others.
			above := 0
			if pv.name == pv.pool() {
				target, _ := w.familyUse(pv)
				above = max(0, target-pv.max)
			}
			m.surge.WithLabelValues(pv.name).Set(float64(above))
		}
	}
	m.nodes.Reset()
	for _, st := range p.Steps {
		for _, r := range st.Reasons {
			m.nodes.WithLabelValues(st.Pool, r, st.State).Inc()
		}
	}
}

func (m *metrics) result(pool, result string) { m.results.WithLabelValues(pool, result).Inc() }
