package e2e

import (
	"sync"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"
	"sigs.k8s.io/cluster-autoscaler/pkg/simulator/framework"
	caerrors "sigs.k8s.io/cluster-autoscaler/pkg/utils/errors"
)

// swappable is the cloud provider the autoscaler holds. It forwards every
// call to the provider of the moment, so that a scenario can restart the
// provider under a running autoscaler (what a restart of `hcloudscale
// serve` does to an autoscaler using externalgrpc), and it adds up the
// time spent in calls: the provider's share of the loop.
type swappable struct {
	mu sync.RWMutex // guards p
	p  cloudprovider.CloudProvider

	spent atomic.Int64 // nanoseconds inside the provider
	calls atomic.Int64
}

var (
	_ cloudprovider.CloudProvider = (*swappable)(nil)
	_ cloudprovider.NodeGroup     = (*swappedGroup)(nil)
)

func (s *swappable) set(p cloudprovider.CloudProvider) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p = p
}

func (s *swappable) current() cloudprovider.CloudProvider {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.p
}

// timed counts a call that started at start.
func (s *swappable) timed(start time.Time) {
	s.spent.Add(int64(time.Since(start)))
	s.calls.Add(1)
}

func (s *swappable) group(g cloudprovider.NodeGroup) cloudprovider.NodeGroup {
	if g == nil {
		return nil
	}
	return &swappedGroup{s: s, id: g.Id()}
}

func (s *swappable) Name() string { return s.current().Name() }

func (s *swappable) NodeGroups() []cloudprovider.NodeGroup {
	defer s.timed(time.Now())
	var out []cloudprovider.NodeGroup
	for _, g := range s.current().NodeGroups() {
		out = append(out, s.group(g))
	}
	return out
}

func (s *swappable) NodeGroupForNode(n *apiv1.Node) (cloudprovider.NodeGroup, error) {
	defer s.timed(time.Now())
	g, err := s.current().NodeGroupForNode(n)
	if err != nil || g == nil {
		return nil, err
	}
	return s.group(g), nil
}

func (s *swappable) HasInstance(n *apiv1.Node) (bool, error) {
	defer s.timed(time.Now())
	return s.current().HasInstance(n)
}

func (s *swappable) Pricing() (cloudprovider.PricingModel, caerrors.AutoscalerError) {
	return s.current().Pricing()
}

func (s *swappable) GetAvailableMachineTypes() ([]string, error) {
	return s.current().GetAvailableMachineTypes()
}

func (s *swappable) NewNodeGroup(machineType string, labels, systemLabels map[string]string, taints []apiv1.Taint, extra map[string]resource.Quantity) (cloudprovider.NodeGroup, error) {
	return s.current().NewNodeGroup(machineType, labels, systemLabels, taints, extra)
}

func (s *swappable) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return s.current().GetResourceLimiter()
}

func (s *swappable) GPULabel() string { return s.current().GPULabel() }

func (s *swappable) GetAvailableGPUTypes() map[string]struct{} {
	return s.current().GetAvailableGPUTypes()
}

func (s *swappable) GetNodeGpuConfig(n *apiv1.Node) *cloudprovider.GpuConfig {
	return s.current().GetNodeGpuConfig(n)
}

// Cleanup is the autoscaler's; the world ends the provider itself.
func (s *swappable) Cleanup() error { return nil }

func (s *swappable) Refresh() error {
	defer s.timed(time.Now())
	return s.current().Refresh()
}

// swappedGroup is a node group of whichever provider is current, found by
// its ID on every call.
type swappedGroup struct {
	s  *swappable
	id string
}

func (g *swappedGroup) get() cloudprovider.NodeGroup {
	for _, ng := range g.s.current().NodeGroups() {
		if ng.Id() == g.id {
			return ng
		}
	}
	panic("node group " + g.id + " is gone")
}

func (g *swappedGroup) MaxSize() int { return g.get().MaxSize() }
func (g *swappedGroup) MinSize() int { return g.get().MinSize() }
func (g *swappedGroup) TargetSize() (int, error) {
	defer g.s.timed(time.Now())
	return g.get().TargetSize()
}
func (g *swappedGroup) IncreaseSize(delta int) error {
	defer g.s.timed(time.Now())
	return g.get().IncreaseSize(delta)
}
func (g *swappedGroup) AtomicIncreaseSize(delta int) error {
	defer g.s.timed(time.Now())
	return g.get().AtomicIncreaseSize(delta)
}
func (g *swappedGroup) DeleteNodes(n []*apiv1.Node) error {
	defer g.s.timed(time.Now())
	return g.get().DeleteNodes(n)
}
func (g *swappedGroup) ForceDeleteNodes(n []*apiv1.Node) error {
	defer g.s.timed(time.Now())
	return g.get().ForceDeleteNodes(n)
}
func (g *swappedGroup) DecreaseTargetSize(delta int) error {
	defer g.s.timed(time.Now())
	return g.get().DecreaseTargetSize(delta)
}
func (g *swappedGroup) Id() string    { return g.id }
func (g *swappedGroup) Debug() string { return g.get().Debug() }
func (g *swappedGroup) Nodes() ([]cloudprovider.Instance, error) {
	defer g.s.timed(time.Now())
	return g.get().Nodes()
}
func (g *swappedGroup) TemplateNodeInfo() (*framework.NodeInfo, error) {
	defer g.s.timed(time.Now())
	return g.get().TemplateNodeInfo()
}
func (g *swappedGroup) Exist() bool                              { return g.get().Exist() }
func (g *swappedGroup) Create() (cloudprovider.NodeGroup, error) { return g.get().Create() }
func (g *swappedGroup) Delete() error                            { return g.get().Delete() }
func (g *swappedGroup) Autoprovisioned() bool                    { return g.get().Autoprovisioned() }
func (g *swappedGroup) GetOptions(d caconfig.NodeGroupAutoscalingOptions) (*caconfig.NodeGroupAutoscalingOptions, error) {
	return g.get().GetOptions(d)
}
