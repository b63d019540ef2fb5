package hcloudscale

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/hcloudscale/hcloudscale/servercache"
)

// PodRate is the hourly net price of one CPU core and of one GiB of memory,
// for pricing pods by their requests.
type PodRate struct {
	PerCore float64
	PerGiB  float64
}

// ErrNoPrice is returned by PodRate when no pool's server type has a price
// in the pool's location.
var ErrNoPrice = errors.New("no pool has a server type with a known price")

// PodRate derives the cluster's pod rate from its pools: half of a pool's
// hourly price pays for its cores and half for its memory, and per
// resource the cheapest pool sets the rate. A pod that asks for a whole
// server of the cheapest pool thus costs about what that server costs. The
// server-type catalogue is cached, so this costs a request at most once per
// catalogue TTL.
func (c *Cluster) PodRate(ctx context.Context) (PodRate, error) {
	types, err := c.types.All(ctx)
	if err != nil {
		return PodRate{}, fmt.Errorf("server types: %w", err)
	}
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	r := PodRate{PerCore: math.Inf(1), PerGiB: math.Inf(1)}
	for _, p := range c.pools.Load().list {
		cfg := p.Config()
		t := byName[cfg.ServerType]
		if t == nil || t.Cores <= 0 || t.MemoryGB <= 0 {
			continue
		}
		loc, ok := t.Locations[cfg.Location]
		if !ok || !loc.HasPrice {
			continue
		}
		r.PerCore = min(r.PerCore, loc.PriceHourlyNet/2/float64(t.Cores))
		r.PerGiB = min(r.PerGiB, loc.PriceHourlyNet/2/t.MemoryGB)
	}
	if math.IsInf(r.PerCore, 1) {
		return PodRate{}, ErrNoPrice
	}
	return r, nil
}
