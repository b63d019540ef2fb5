package hcloudscale

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// driftState is what the Cluster last found of drift, for its metric.
type driftState struct {
	mu sync.Mutex // guards the fields below; held while drift is computed
	// snap and generation are the listing and configuration the gauge
	// was computed from: it is computed again when either changes.
	snap       *servercache.Snapshot
	generation uint64
	gauge      *prometheus.GaugeVec // nil without a registerer
}

// registerDrift registers hcloudscale_pool_drifted_servers, or reuses the
// gauge an earlier Cluster registered on reg.
func (c *Cluster) registerDrift(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hcloudscale_pool_drifted_servers",
		Help: "Servers of a pool that differ from its current configuration, by what differs (reason: server_type, location, image, placement_group, network, firewalls, labels, user_data; offering where the pool's replace.drift lists it). Nothing replaces them by itself.",
	}, []string{"pool", "reason"})
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := (*prometheus.GaugeVec)(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*prometheus.GaugeVec)
		}
		if !ok {
			return err
		}
		g = existing
	}
	c.drift.gauge = g
	return nil
}

// Drift returns, per pool, the servers that differ from the pool's current
// configuration ([pool.Pool.Drift]), with the problems of pools whose
// image could not be resolved.
func (c *Cluster) Drift(ctx context.Context) (map[string][]pool.Drift, error) {
	out := map[string][]pool.Drift{}
	var errs []error
	for _, p := range c.Pools() {
		d, err := p.Drift(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		out[p.Name()] = d
	}
	return out, errors.Join(errs...)
}

// updateDrift sets the drift gauge after a new listing or configuration.
func (c *Cluster) updateDrift(ctx context.Context) {
	if c.drift.gauge == nil || !c.drift.mu.TryLock() {
		return
	}
	defer c.drift.mu.Unlock()
	snap, gen := c.servers.Current(), c.Generation()
	if snap == nil || (snap == c.drift.snap && gen == c.drift.generation) {
		return
	}
	drift, err := c.Drift(ctx)
	if err != nil {
		c.log.Warn("drift of the pools' servers is incomplete", zap.Error(err))
	}
	c.drift.snap, c.drift.generation = snap, gen
	c.drift.gauge.Reset()
	for name, servers := range drift {
		for _, d := range servers {
			for _, r := range d.Reasons {
				c.drift.gauge.WithLabelValues(name, string(r)).Inc()
			}
		}
	}
}
