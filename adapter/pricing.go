package adapter

import (
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
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
// cluster's rate ([hcloudscale.Cluster.PodRate]) for the interval:
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
	rate, err := m.provider.cluster.PodRate(ctx)
	if err != nil {
		return 0, autoscalerError(err, "pod %s/%s: price", pod.Namespace, pod.Name)
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cores := float64(req.Cpu().MilliValue()) / 1000
	gib := float64(req.Memory().Value()) / (1 << 30)
	return end.Sub(start).Hours() * (cores*rate.PerCore + gib*rate.PerGiB), nil
}
