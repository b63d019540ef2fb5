package hcloudscale

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hcloudscale/hcloudscale/internal/pacer"
)

// rateLimitCollector exports the pacer's view of the API budget at scrape
// time, so the numbers are never stale and cost nothing between scrapes.
type rateLimitCollector struct {
	limit, remaining, estimated, waiting *prometheus.Desc
	waited, waits, overdue, got429       *prometheus.Desc

	mu     sync.Mutex // guards source
	source *pacer.Pacer
}

func newRateLimitCollector() *rateLimitCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("hcloudscale", "api", name), help, nil, nil)
	}
	return &rateLimitCollector{
		limit:     d("ratelimit_limit", "Requests per hour the project may send (RateLimit-Limit of the last answer)."),
		remaining: d("ratelimit_remaining", "Requests left in the project's budget (RateLimit-Remaining of the last answer)."),
		estimated: d("ratelimit_estimated_remaining", "Requests left now by the pacer's estimate: the last RateLimit-Remaining less the requests sent since, plus the refill."),
		waiting:   d("pacer_waiting_requests", "Requests held back by the pacer right now."),
		waited:    d("pacer_wait_seconds_total", "Time requests spent held back by the pacer to keep the reserve."),
		waits:     d("pacer_waits_total", "Requests the pacer held back."),
		overdue:   d("pacer_overdue_total", "Requests sent into the reserve after waiting the pacer's maximum."),
		got429:    d("rate_limited_total", "Answers with status 429 rate_limit_exceeded."),
	}
}

func (c *rateLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.remaining, c.estimated, c.waiting, c.waited, c.waits, c.overdue, c.got429} {
		ch <- d
	}
}

func (c *rateLimitCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	p := c.source
	c.mu.Unlock()
	if p == nil {
		return
	}
	s := p.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.limit, float64(s.Limit))
	gauge(c.remaining, float64(s.Remaining))
	gauge(c.estimated, float64(s.Estimated))
	gauge(c.waiting, float64(s.Waiting))
	counter(c.waited, s.Waited.Seconds())
	counter(c.waits, float64(s.Waits))
	counter(c.overdue, float64(s.Overdue))
	counter(c.got429, float64(s.Got429))
}

// swap replaces the source from with to; it does nothing when another
// Cluster has taken over since.
func (c *rateLimitCollector) swap(from, to *pacer.Pacer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.source == from {
		c.source = to
	}
}

// registerRateLimit registers the budget metrics for p, or takes over the
// collector an earlier Cluster registered on reg: the most recent Cluster
// reports (two Clusters of one process share the project's budget anyway).
// The returned function stops reporting p.
func registerRateLimit(reg prometheus.Registerer, p *pacer.Pacer) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	c := newRateLimitCollector()
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := (*rateLimitCollector)(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*rateLimitCollector)
		}
		if !ok {
			return nil, err
		}
		c = existing
	}
	c.mu.Lock()
	c.source = p
	c.mu.Unlock()
	return func() { c.swap(p, nil) }, nil
}
