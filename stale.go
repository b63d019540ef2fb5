package hcloudscale

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// staleSources tells since when each read path has been answering from
// stale data; zero while fresh.
type staleSources struct {
	servers, serverTypes, images func() time.Time
}

// staleCollector exports hcloudscale_stale_since_seconds at scrape time:
// the Unix time since which a read path (the server listing, the
// server-type catalogue, resolved images) has been served stale because
// the API failed, 0 while it is fresh.
type staleCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex // guards source
	source *staleSources
}

func (c *staleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *staleCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s := c.source
	c.mu.Unlock()
	if s == nil {
		return
	}
	for _, d := range []struct {
		name  string
		since func() time.Time
	}{{"servers", s.servers}, {"server_types", s.serverTypes}, {"images", s.images}} {
		v := 0.0
		if t := d.since(); !t.IsZero() {
			v = float64(t.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, d.name)
	}
}

// registerStale registers the staleness metric for s, or takes over the
// collector an earlier Cluster registered on reg, as registerRateLimit
// does. The returned function stops reporting s.
func registerStale(reg prometheus.Registerer, s *staleSources) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	c := &staleCollector{desc: prometheus.NewDesc("hcloudscale_stale_since_seconds",
		"Unix time since which a read path (data: servers, server_types, images) has answered from stale data because the API failed; 0 while fresh.",
		[]string{"data"}, nil)}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := (*staleCollector)(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*staleCollector)
		}
		if !ok {
			return nil, err
		}
		c = existing
	}
	c.mu.Lock()
	c.source = s
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.source == s {
			c.source = nil
		}
	}, nil
}
