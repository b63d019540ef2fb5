package adapter

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	apiv1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"
	"sigs.k8s.io/cluster-autoscaler/pkg/simulator/framework"

	"github.com/hcloudscale/hcloudscale/pool"
)

// NodeGroup is a [cloudprovider.NodeGroup] over one [pool.Pool]. The
// sizes, instances and options come from memory; only DeleteNodes,
// ForceDeleteNodes and TemplateNodeInfo (when the catalogue is cold) call
// the API, bounded by the call timeout.
type NodeGroup struct {
	provider *Provider
	pool     *pool.Pool
}

// Pool returns the pool behind the node group.
func (g *NodeGroup) Pool() *pool.Pool { return g.pool }

// MaxSize returns the pool's max size.
func (g *NodeGroup) MaxSize() int { return g.pool.MaxSize() }

// MinSize returns the pool's min size.
func (g *NodeGroup) MinSize() int { return g.pool.MinSize() }

// TargetSize returns the pool's servers that are not being deleted, plus
// its pending and failed creates.
func (g *NodeGroup) TargetSize() (int, error) { return g.pool.TargetSize(), nil }

// IncreaseSize records delta claims and returns: the servers are created
// in the background and show in Nodes at once, as creating instances.
// While the pool's server type is remembered as sold out in its location
// it fails at once (a TransientError), so that the autoscaler backs the
// group off and tries another.
func (g *NodeGroup) IncreaseSize(delta int) error {
	ctx, cancel := g.provider.call()
	defer cancel()
	return autoscalerError(g.pool.IncreaseSize(ctx, delta), "node group %q: increase size by %d", g.Id(), delta)
}

// atomicPoll is how often AtomicIncreaseSize looks for the claims of
// the scale-up it started.
const atomicPoll = time.Millisecond

// AtomicIncreaseSize adds delta servers, all or none: if any of them
// fails, the ones created are deleted again. As the autoscaler's contract
// asks, it does not wait for the servers: it returns once the claims are
// recorded (the target size includes them), or with the error that
// refused them (bounds, a sold-out offering). The wait for the servers
// and any roll-back run in the background, bounded by the pools' creation
// timeout; a roll-back is logged, and the autoscaler sees the target
// shrink back as if the scale-up had timed out.
func (g *NodeGroup) AtomicIncreaseSize(delta int) error {
	ctx, cancel := g.provider.call()
	defer cancel()
	if !g.provider.startBackground() {
		return autoscalerError(context.Canceled, "node group %q: atomic increase size by %d: provider cleaned up", g.Id(), delta)
	}
	// The pool records the claims first and then waits for them. Seeing
	// delta server names that were not there before tells that the
	// claims are in: a name stays with its claim when the server is
	// created, while its instance ID changes.
	before := map[string]bool{}
	for _, in := range g.pool.Instances() {
		before[in.Name] = true
	}
	done := make(chan error, 1)
	go func() {
		defer g.provider.background.Done()
		err := g.pool.AtomicIncreaseSize(g.provider.root, delta)
		if err != nil {
			g.provider.log.Warn("atomic scale-up failed; no server of it remains",
				zap.String("pool", g.Id()), zap.Int("delta", delta), zap.Error(err))
		}
		done <- err
	}()
	tick := time.NewTicker(atomicPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			// Finished (or refused) within the call: the result is known.
			return autoscalerError(err, "node group %q: atomic increase size by %d", g.Id(), delta)
		case <-tick.C:
			added := 0
			for _, in := range g.pool.Instances() {
				if !before[in.Name] {
					added++
				}
			}
			if added >= delta {
				return nil
			}
		case <-ctx.Done():
			// Not refused within the call; the scale-up carries on and
			// its outcome is logged.
			return nil
		}
	}
}

// DeleteNodes deletes the servers (or failed and pending creates) behind
// nodes. Each node is named by its provider ID, else by its name; the
// autoscaler's fake nodes carry the instance ID as both. Every node must
// belong to the group, else nothing is deleted. It refuses to go below
// the min size, except for failed creates, which the autoscaler deletes
// at any size. It returns once the API accepted the deletes; the servers
// leave the target at once.
func (g *NodeGroup) DeleteNodes(nodes []*apiv1.Node) error {
	ctx, cancel := g.provider.call()
	defer cancel()
	return autoscalerError(g.pool.DeleteInstances(ctx, instanceIDs(nodes)), "node group %q: delete nodes", g.Id())
}

// ForceDeleteNodes is DeleteNodes without the min-size check.
func (g *NodeGroup) ForceDeleteNodes(nodes []*apiv1.Node) error {
	ctx, cancel := g.provider.call()
	defer cancel()
	return autoscalerError(g.pool.ForceDeleteInstances(ctx, instanceIDs(nodes)), "node group %q: force delete nodes", g.Id())
}

// instanceIDs names each node the way the pool resolves instances.
func instanceIDs(nodes []*apiv1.Node) []string {
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Spec.ProviderID != "" {
			ids = append(ids, n.Spec.ProviderID)
		} else {
			ids = append(ids, n.Name)
		}
	}
	return ids
}

// DecreaseTargetSize removes pending and failed creates that have no
// server. A request larger than what can be removed is clamped, not an
// error: an error here aborts the autoscaler's loop, every loop.
func (g *NodeGroup) DecreaseTargetSize(delta int) error {
	ctx, cancel := g.provider.call()
	defer cancel()
	return autoscalerError(g.pool.DecreaseTargetSize(ctx, delta), "node group %q: decrease target size by %d", g.Id(), -delta)
}

// Id returns the pool name.
func (g *NodeGroup) Id() string { return g.pool.Name() }

// Debug describes the pool.
func (g *NodeGroup) Debug() string {
	cfg := g.pool.Config()
	return fmt.Sprintf("%s (%s in %s, min %d, max %d, target %d)",
		cfg.Name, cfg.ServerType, cfg.Location, g.pool.MinSize(), g.pool.MaxSize(), g.pool.TargetSize())
}

// Nodes returns the pool's instances, from memory: servers by their
// provider ID hcloud://<id>, creates without a server yet by their claim
// ID. A failed create is an instance in state creating with error info
// (OutOfResourcesErrorClass for capacity errors), which makes the
// autoscaler back the group off, try another one and delete it.
func (g *NodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	instances := g.pool.Instances()
	out := make([]cloudprovider.Instance, len(instances))
	for i, in := range instances {
		out[i] = instance(in)
	}
	return out, nil
}

// instance converts a pool instance. The pool's states and classes have
// the autoscaler's values; they are spelled out here so that a change on
// either side fails the tests rather than the conversion.
func instance(in pool.Instance) cloudprovider.Instance {
	st := &cloudprovider.InstanceStatus{}
	switch in.State {
	case pool.Running:
		st.State = cloudprovider.InstanceRunning
	case pool.Creating:
		st.State = cloudprovider.InstanceCreating
	case pool.Deleting:
		st.State = cloudprovider.InstanceDeleting
	}
	if e := in.Error; e != nil {
		class := cloudprovider.OtherErrorClass
		if e.Class == pool.OutOfResources {
			class = cloudprovider.OutOfResourcesErrorClass
		}
		st.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: class, ErrorCode: e.Code, ErrorMessage: e.Message}
	}
	return cloudprovider.Instance{Id: in.ID, Status: st}
}

// TemplateNodeInfo returns the node a new server of the pool becomes, for
// scale-from-zero: labels, taints, capacity and a conservative
// allocatable ([pool.Pool.TemplateNode]), without pods; the autoscaler
// adds its DaemonSet pods.
func (g *NodeGroup) TemplateNodeInfo() (*framework.NodeInfo, error) {
	ctx, cancel := g.provider.call()
	defer cancel()
	node, err := g.pool.TemplateNode(ctx)
	if err != nil {
		return nil, autoscalerError(err, "node group %q: template node", g.Id())
	}
	return framework.NewNodeInfo(node, nil), nil
}

// Exist returns true: every pool exists from the start.
func (g *NodeGroup) Exist() bool { return true }

// Create returns [cloudprovider.ErrNotImplemented] and changes nothing.
func (g *NodeGroup) Create() (cloudprovider.NodeGroup, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// Delete returns [cloudprovider.ErrNotImplemented] and changes nothing.
func (g *NodeGroup) Delete() error { return cloudprovider.ErrNotImplemented }

// Autoprovisioned returns false.
func (g *NodeGroup) Autoprovisioned() bool { return false }

// GetOptions returns the autoscaler's defaults with the pool's autoscaling
// settings (cluster config nodeConfigs.<pool>.autoscaling) laid over
// them, every field set. For a pool that sets none it returns nil and no
// error, and the autoscaler uses its flags.
func (g *NodeGroup) GetOptions(defaults caconfig.NodeGroupAutoscalingOptions) (*caconfig.NodeGroupAutoscalingOptions, error) {
	o, ok := g.pool.Options(pool.AutoscalingOptions{
		ScaleDownUtilizationThreshold:    defaults.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: defaults.ScaleDownGpuUtilizationThreshold,
		ScaleDownUnneededTime:            defaults.ScaleDownUnneededTime,
		ScaleDownUnreadyTime:             defaults.ScaleDownUnreadyTime,
		MaxNodeProvisionTime:             defaults.MaxNodeProvisionTime,
		MaxNodeStartupTime:               defaults.MaxNodeStartupTime,
		ZeroOrMaxNodeScaling:             defaults.ZeroOrMaxNodeScaling,
		AllowNonAtomicScaleUpToMax:       defaults.AllowNonAtomicScaleUpToMax,
		IgnoreDaemonSetsUtilization:      defaults.IgnoreDaemonSetsUtilization,
	})
	if !ok {
		return nil, nil
	}
	// Starting from defaults keeps any field a later autoscaler adds at
	// its default.
	out := defaults
	out.ScaleDownUtilizationThreshold = o.ScaleDownUtilizationThreshold
	out.ScaleDownGpuUtilizationThreshold = o.ScaleDownGpuUtilizationThreshold
	out.ScaleDownUnneededTime = o.ScaleDownUnneededTime
	out.ScaleDownUnreadyTime = o.ScaleDownUnreadyTime
	out.MaxNodeProvisionTime = o.MaxNodeProvisionTime
	out.MaxNodeStartupTime = o.MaxNodeStartupTime
	out.ZeroOrMaxNodeScaling = o.ZeroOrMaxNodeScaling
	out.AllowNonAtomicScaleUpToMax = o.AllowNonAtomicScaleUpToMax
	out.IgnoreDaemonSetsUtilization = o.IgnoreDaemonSetsUtilization
	return &out, nil
}
