package pool

import (
	"fmt"
	"time"
)

// Price returns what a server of the pool costs between start and end:
// the hourly net price of its server type in its location, from the
// catalogue already in memory (no API call), times the hours. It is what
// the autoscaler's price expander compares; all pools share the
// project's currency.
func (p *Pool) Price(start, end time.Time) (float64, error) {
	if end.Before(start) {
		return 0, fmt.Errorf("pool %q: price: end %s is before start %s", p.cfg.Name, end, start)
	}
	cfg := &p.current().cfg
	for _, st := range p.deps.Types.Current() {
		if st.Name != cfg.ServerType {
			continue
		}
		loc, ok := st.Locations[cfg.Location]
		if !ok || !loc.HasPrice {
			return 0, fmt.Errorf("pool %q: price: server type %s has no price in location %s", p.cfg.Name, st.Name, cfg.Location)
		}
		return loc.PriceHourlyNet * end.Sub(start).Hours(), nil
	}
	if p.deps.Types.Current() == nil {
		return 0, fmt.Errorf("pool %q: price: server type catalogue not loaded yet", p.cfg.Name)
	}
	return 0, fmt.Errorf("pool %q: price: server type %s does not exist", p.cfg.Name, cfg.ServerType)
}

// AutoscalingOptions mirrors the Cluster Autoscaler's
// config.NodeGroupAutoscalingOptions field by field.
type AutoscalingOptions struct {
	ScaleDownUtilizationThreshold    float64
	ScaleDownGpuUtilizationThreshold float64
	ScaleDownUnneededTime            time.Duration
	ScaleDownUnreadyTime             time.Duration
	MaxNodeProvisionTime             time.Duration
	MaxNodeStartupTime               time.Duration
	ZeroOrMaxNodeScaling             bool
	AllowNonAtomicScaleUpToMax       bool
	IgnoreDaemonSetsUtilization      bool
}

// Options returns the pool's autoscaling settings laid over defaults, and
// false (with nil) when the pool sets none, so the autoscaler uses its
// flag defaults. The autoscaler uses the returned struct field by field,
// so every field the pool leaves unset keeps its default.
func (p *Pool) Options(defaults AutoscalingOptions) (*AutoscalingOptions, bool) {
	a := p.current().cfg.Autoscaling
	if a == nil {
		return nil, false
	}
	o := defaults
	set(&o.ScaleDownUtilizationThreshold, a.ScaleDownUtilizationThreshold)
	set(&o.ScaleDownGpuUtilizationThreshold, a.ScaleDownGPUUtilizationThreshold)
	set(&o.ScaleDownUnneededTime, a.ScaleDownUnneededTime)
	set(&o.ScaleDownUnreadyTime, a.ScaleDownUnreadyTime)
	set(&o.MaxNodeProvisionTime, a.MaxNodeProvisionTime)
	set(&o.MaxNodeStartupTime, a.MaxNodeStartupTime)
	set(&o.ZeroOrMaxNodeScaling, a.ZeroOrMaxNodeScaling)
	set(&o.AllowNonAtomicScaleUpToMax, a.AllowNonAtomicScaleUpToMax)
	set(&o.IgnoreDaemonSetsUtilization, a.IgnoreDaemonSetsUtilization)
	return &o, true
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
