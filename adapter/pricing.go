package adapter

import (
	"errors"
	"fmt"
	"math"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// errNoPool is wrapped by the price of a node that belongs to no pool.
var errNoPool = errors.New("belongs to no node group")

// pricingModel prices nodes and pods for the autoscaler's price expander,
// which ranks each scale-up option by
//
//	(node price × nodes + s) / (sum of the pending pods' prices + s)
//
// where s is the price of a small synthetic pod. A pod's price must
// therefore not depend on the option: it is priced at one rate for the
// whole cluster, and the expander compares options by their node price.
type pricingModel struct {
	provider *Provider
}

// NodePrice is the hourly net price of the pool's server type in its
// location times the hours ([pool.Pool.Price]), from the catalogue in
// memory. The expander mostly asks about template nodes, which have no
// provider ID, so the pool is found by provider ID or name, else by the
// node's hcloud/node-group label. A node of no pool is an error; the
// expander then skips the option.
func (m *pricingModel) NodePrice(node *apiv1.Node, start, end time.Time) (float64, error) {
	pl := m.poolOf(node)
	if pl == nil {
		return 0, fmt.Errorf("node %q (provider ID %q): %w", node.Name, node.Spec.ProviderID, errNoPool)
	}
	price, err := pl.Price(start, end)
	if err != nil {
		return 0, autoscalerError(err, "node %q: price", node.Name)
	}
	return price, nil
}

func (m *pricingModel) poolOf(node *apiv1.Node) *pool.Pool {
	if g := m.provider.groupForNode(node); g != nil {
		return g.pool
	}
	return m.provider.cluster.Pool(node.Labels[config.LabelNodeGroup])
}

// PodPrice is what the pod's CPU and memory requests cost at the
// cluster's rate (see [podRate]) for the interval:
//
//	hours × (CPU cores × rate per core + memory GiB × rate per GiB)
//
// The requests are counted as the scheduler counts them: containers,
// init containers and sidecars, pod overhead and pod-level resources.
func (m *pricingModel) PodPrice(pod *apiv1.Pod, start, end time.Time) (float64, error) {
	if end.Before(start) {
		return 0, fmt.Errorf("pod %s/%s: price: end %s is before start %s", pod.Namespace, pod.Name, end, start)
	}
	ctx, cancel := m.provider.call()
	defer cancel()
	types, err := m.provider.cluster.ServerTypes(ctx)
	if err != nil {
		return 0, autoscalerError(err, "pod %s/%s: price: server types", pod.Namespace, pod.Name)
	}
	rate, err := podRate(m.provider.cluster.Pools(), types)
	if err != nil {
		return 0, fmt.Errorf("pod %s/%s: price: %w", pod.Namespace, pod.Name, err)
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cores := float64(req.Cpu().MilliValue()) / 1000
	gib := float64(req.Memory().Value()) / (1 << 30)
	return end.Sub(start).Hours() * (cores*rate.perCore + gib*rate.perGiB), nil
}

// rate is the hourly price of one CPU core and of one GiB of memory.
type rate struct {
	perCore, perGiB float64
}

// podRate derives the cluster's rate from the pools: half of a pool's
// hourly price pays for its cores and half for its memory, and per
// resource the cheapest pool sets the rate. A pod that asks for a whole
// server of the cheapest pool thus costs about what that server costs.
// The externalgrpc server prices pods the same way.
func podRate(pools []*pool.Pool, types []*servercache.ServerType) (rate, error) {
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	r := rate{perCore: math.Inf(1), perGiB: math.Inf(1)}
	for _, p := range pools {
		cfg := p.Config()
		t := byName[cfg.ServerType]
		if t == nil || t.Cores <= 0 || t.MemoryGB <= 0 {
			continue
		}
		loc, ok := t.Locations[cfg.Location]
		if !ok || !loc.HasPrice {
			continue
		}
		r.perCore = min(r.perCore, loc.PriceHourlyNet/2/float64(t.Cores))
		r.perGiB = min(r.perGiB, loc.PriceHourlyNet/2/t.MemoryGB)
	}
	if math.IsInf(r.perCore, 1) {
		return rate{}, errors.New("no node group has a server type with a known price")
	}
	return r, nil
}
