package adapter

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	"sigs.k8s.io/cluster-autoscaler/pkg/clusterstate"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"
	caerrors "sigs.k8s.io/cluster-autoscaler/pkg/utils/errors"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

// TestScaleUpAndDelete drives a node group through its life: IncreaseSize
// returns while the fake still initializes the servers, instances go from
// creating to running as the fake's clock moves, the nodes map back to
// the group, and DeleteNodes leaves no server behind.
func TestScaleUpAndDelete(t *testing.T) {
	e := newEnv(t)
	g := e.group("workers")

	start := time.Now()
	if err := g.IncreaseSize(2); err != nil {
		t.Fatalf("IncreaseSize(2): %v", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("IncreaseSize took %s; want it to return at once", elapsed)
	}
	if got := e.targetSize(g); got != 2 {
		t.Errorf("TargetSize right after IncreaseSize(2) = %d; want 2", got)
	}
	if diff := cmp.Diff(map[string]int{"creating": 2}, states(e.nodes(g))); diff != "" {
		t.Errorf("instances right after the increase (-want +got):\n%s", diff)
	}
	// The create flows run in the background and the fake answers at once,
	// so a claim may already carry its server's ID here.
	for _, in := range e.nodes(g) {
		if !strings.HasPrefix(in.Id, "hcloudscale://workers/") && !strings.HasPrefix(in.Id, "hcloud://") {
			t.Errorf("instance id right after the increase = %q; want a claim ID hcloudscale://workers/<name> or hcloud://<id>", in.Id)
		}
	}

	// The clock stands still: the servers exist but initialize, and once the
	// create responses are in, the instances carry the servers' IDs.
	e.eventually("two create requests", 0, func() bool { return e.fake.Count("POST /servers") == 2 })
	var creating []string
	for _, s := range e.servers("workers") {
		if s.Status != hcloud.ServerStatusInitializing {
			t.Errorf("server %s status = %s while the clock stands still; want initializing", s.Name, s.Status)
		}
		creating = append(creating, providerID(s.ID))
	}
	slices.Sort(creating)
	e.eventually("the claims to carry their servers' IDs", 0, func() bool {
		var ids []string
		for _, in := range e.nodes(g) {
			ids = append(ids, in.Id)
		}
		slices.Sort(ids)
		return slices.Equal(ids, creating)
	})
	if diff := cmp.Diff(map[string]int{"creating": 2}, states(e.nodes(g))); diff != "" {
		t.Errorf("instances while the servers initialize (-want +got):\n%s", diff)
	}

	e.eventually("both instances running", 100*time.Millisecond, func() bool {
		return cmp.Equal(states(e.nodes(g)), map[string]int{"running": 2})
	})
	var wantIDs, gotIDs []string
	var nodes []*apiv1.Node
	for _, s := range e.servers("workers") {
		wantIDs = append(wantIDs, providerID(s.ID))
		nodes = append(nodes, node(s))
	}
	for _, in := range e.nodes(g) {
		gotIDs = append(gotIDs, in.Id)
	}
	if diff := cmp.Diff(wantIDs, gotIDs, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("instance IDs (-want +got):\n%s", diff)
	}
	for _, n := range nodes {
		got, err := e.provider.NodeGroupForNode(n)
		if err != nil || got == nil || got.Id() != "workers" {
			t.Errorf("NodeGroupForNode(%s) = %v, %v; want workers", n.Spec.ProviderID, got, err)
		}
	}

	if err := g.DeleteNodes(nodes); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	if got := e.targetSize(g); got != 0 {
		t.Errorf("TargetSize right after DeleteNodes = %d; want 0", got)
	}
	if diff := cmp.Diff(map[string]int{"deleting": 2}, states(e.nodes(g))); diff != "" {
		t.Errorf("instances right after the delete (-want +got):\n%s", diff)
	}
	e.eventually("the servers to be gone", 100*time.Millisecond, func() bool {
		return len(e.servers("workers")) == 0 && len(e.nodes(g)) == 0
	})
}

// TestCapacityFailure checks the autoscaler's fail-over path: a sold-out
// offering becomes an instance in state creating with
// OutOfResourcesErrorClass, the next IncreaseSize fails at once with a
// transient error, and DeleteNodes with the fake node the autoscaler
// builds for the failed instance removes the placeholder.
func TestCapacityFailure(t *testing.T) {
	e := newEnv(t)
	e.fake.SetUnavailable("cpx21", "fsn1", true)
	g := e.group("workers")

	if err := g.IncreaseSize(1); err != nil {
		t.Fatalf("IncreaseSize(1): %v", err)
	}
	var failed cloudprovider.Instance
	// The pool publishes the placeholder a moment before it remembers the
	// offering as sold out; wait for both.
	e.eventually("a failed instance", 0, func() bool {
		in := e.nodes(g)
		if len(in) == 1 && in[0].Status.ErrorInfo != nil && len(g.(*NodeGroup).Pool().Status().Unavailable) > 0 {
			failed = in[0]
			return true
		}
		return false
	})
	want := &cloudprovider.InstanceStatus{
		State: cloudprovider.InstanceCreating,
		ErrorInfo: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OutOfResourcesErrorClass,
			ErrorCode:  "resource_unavailable",
		},
	}
	if diff := cmp.Diff(want, failed.Status, cmpopts.IgnoreFields(cloudprovider.InstanceErrorInfo{}, "ErrorMessage")); diff != "" {
		t.Errorf("failed instance status (-want +got):\n%s", diff)
	}
	if failed.Status.ErrorInfo.ErrorMessage == "" {
		t.Error("failed instance has no error message")
	}
	if !strings.HasPrefix(failed.Id, "hcloudscale://workers/") {
		t.Errorf("failed instance id = %q; want a claim ID hcloudscale://workers/<name>", failed.Id)
	}
	if got := e.targetSize(g); got != 1 {
		t.Errorf("TargetSize with a failed instance = %d; want 1 (it counts until deleted)", got)
	}

	err := g.IncreaseSize(1)
	var aerr caerrors.AutoscalerError
	if !errors.As(err, &aerr) || aerr.Type() != caerrors.TransientError || !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Errorf("IncreaseSize while sold out = %v; want a TransientError matching pool.ErrOfferingUnavailable", err)
	}

	fakeNode := clusterstate.FakeNode(failed, cloudprovider.FakeNodeCreateError)
	got, err := e.provider.NodeGroupForNode(fakeNode)
	if err != nil || got == nil || got.Id() != "workers" {
		t.Fatalf("NodeGroupForNode(fake node %q) = %v, %v; want workers", fakeNode.Name, got, err)
	}
	requests := len(e.fake.Requests())
	if err := got.DeleteNodes([]*apiv1.Node{fakeNode}); err != nil {
		t.Fatalf("DeleteNodes(fake node): %v", err)
	}
	if in := e.nodes(g); len(in) != 0 {
		t.Errorf("instances after deleting the placeholder = %v; want none", in)
	}
	if got := e.targetSize(g); got != 0 {
		t.Errorf("TargetSize after deleting the placeholder = %d; want 0", got)
	}
	if n := len(e.fake.Requests()) - requests; n != 0 {
		t.Errorf("deleting a placeholder sent %d requests; want none", n)
	}
	if n := len(e.servers("workers")); n != 0 {
		t.Errorf("servers after the failed create = %d; want 0", n)
	}
}

// TestDeleteFakeNodeAtMinSize deletes the placeholder of a failed create
// although that takes the group below its min size: the autoscaler
// deletes failed instances without a min-size cap, and repeats the delete
// every loop until the instance is gone.
func TestDeleteFakeNodeAtMinSize(t *testing.T) {
	e := newEnv(t)
	g := e.group("arm") // min 1, one server
	arm, _ := e.fake.ServerByID(e.armServer)
	if err := g.ForceDeleteNodes([]*apiv1.Node{node(arm)}); err != nil {
		t.Fatalf("ForceDeleteNodes: %v", err)
	}
	e.fake.SetUnavailable("cax11", "hel1", true)
	if err := g.IncreaseSize(1); err != nil {
		t.Fatalf("IncreaseSize(1): %v", err)
	}
	var failed cloudprovider.Instance
	e.eventually("a failed instance", 0, func() bool {
		for _, in := range e.nodes(g) {
			if in.Status.ErrorInfo != nil {
				failed = in
				return true
			}
		}
		return false
	})
	if got := e.targetSize(g); got != 1 {
		t.Fatalf("TargetSize with one placeholder = %d; want 1 (the min size)", got)
	}
	if err := g.DeleteNodes([]*apiv1.Node{clusterstate.FakeNode(failed, cloudprovider.FakeNodeCreateError)}); err != nil {
		t.Errorf("DeleteNodes(fake node of the failed instance) at min size: %v", err)
	}
	if got := e.targetSize(g); got != 0 {
		t.Errorf("TargetSize after deleting the placeholder = %d; want 0", got)
	}
}

// TestAtomicIncreaseSize checks that the call returns once the claims are
// recorded, that the servers come up, and that a failure rolls back the
// whole scale-up.
func TestAtomicIncreaseSize(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		e := newEnv(t)
		g := e.group("workers")
		if err := g.AtomicIncreaseSize(3); err != nil {
			t.Fatalf("AtomicIncreaseSize(3): %v", err)
		}
		if got := e.targetSize(g); got != 3 {
			t.Errorf("TargetSize right after AtomicIncreaseSize(3) = %d; want 3", got)
		}
		e.eventually("three running instances", 100*time.Millisecond, func() bool {
			return cmp.Equal(states(e.nodes(g)), map[string]int{"running": 3})
		})
	})
	t.Run("roll-back", func(t *testing.T) {
		e := newEnv(t)
		e.fake.SetUnavailable("cpx21", "fsn1", true)
		g := e.group("workers")
		// The claims are recorded, and the creates fail soon after: if
		// they fail before the call sees the claims, it returns the
		// failure; else nil, and the roll-back follows in the background.
		var claimErr *pool.ClaimError
		if err := g.AtomicIncreaseSize(2); err != nil && !errors.As(err, &claimErr) {
			t.Fatalf("AtomicIncreaseSize(2) of a sold-out offering = %v; want nil or the claims' failure", err)
		}
		e.eventually("the scale-up to be rolled back", 100*time.Millisecond, func() bool {
			return e.targetSize(g) == 0 && len(e.nodes(g)) == 0
		})
		if n := len(e.servers("workers")); n != 0 {
			t.Errorf("servers after the roll-back = %d; want 0", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		e := newEnv(t)
		g := e.group("workers")
		err := g.AtomicIncreaseSize(6) // max 5
		var aerr caerrors.AutoscalerError
		if !errors.As(err, &aerr) || aerr.Type() != caerrors.CloudProviderError || !strings.Contains(err.Error(), "max size") {
			t.Errorf("AtomicIncreaseSize(6) over max 5 = %v; want a CloudProviderError naming the max size", err)
		}
		if got := e.targetSize(g); got != 0 {
			t.Errorf("TargetSize after a refused scale-up = %d; want 0", got)
		}
	})
}

// TestDecreaseTargetSize removes the placeholder of a failed create, as
// the autoscaler does when an instance did not come up in time, and
// clamps a larger decrease instead of failing the loop.
func TestDecreaseTargetSize(t *testing.T) {
	e := newEnv(t)
	e.fake.SetUnavailable("cx23", "nbg1", true)
	g := e.group("batch")
	if err := g.IncreaseSize(1); err != nil {
		t.Fatalf("IncreaseSize(1): %v", err)
	}
	e.eventually("a failed instance", 0, func() bool {
		return cmp.Equal(states(e.nodes(g)), map[string]int{"creating/OutOfResource": 1})
	})
	if err := g.DecreaseTargetSize(-2); err != nil {
		t.Fatalf("DecreaseTargetSize(-2) with one placeholder: %v", err)
	}
	if got := e.targetSize(g); got != 0 {
		t.Errorf("TargetSize after the decrease = %d; want 0", got)
	}
}

// TestErrors checks the AutoscalerError type of refused calls and that a
// refused delete deletes nothing.
func TestErrors(t *testing.T) {
	e := newEnv(t)
	arm, _ := e.fake.ServerByID(e.armServer)
	controlPlane, _ := e.fake.ServerByID(e.controlPlane)
	tests := []struct {
		name     string
		call     func() error
		wantType caerrors.AutoscalerErrorType
		wantText string
	}{
		{"increase by zero", func() error { return e.group("workers").IncreaseSize(0) }, caerrors.CloudProviderError, "must be positive"},
		{"increase past max", func() error { return e.group("workers").IncreaseSize(6) }, caerrors.CloudProviderError, "max size"},
		{"decrease by a positive delta", func() error { return e.group("workers").DecreaseTargetSize(1) }, caerrors.CloudProviderError, "must be negative"},
		{"delete a node of another group", func() error { return e.group("workers").DeleteNodes([]*apiv1.Node{node(arm)}) }, caerrors.CloudProviderError, "does not belong"},
		{"delete a node of no group", func() error { return e.group("arm").ForceDeleteNodes([]*apiv1.Node{node(controlPlane)}) }, caerrors.CloudProviderError, "does not belong"},
		{"delete below min", func() error { return e.group("arm").DeleteNodes([]*apiv1.Node{node(arm)}) }, caerrors.CloudProviderError, "below the min size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var aerr caerrors.AutoscalerError
			if !errors.As(err, &aerr) || aerr.Type() != tt.wantType || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error = %v; want a %s containing %q", err, tt.wantType, tt.wantText)
			}
		})
	}
	if _, ok := e.fake.ServerByID(e.armServer); !ok {
		t.Error("the arm server is gone after refused deletes")
	}
	if _, ok := e.fake.ServerByID(e.controlPlane); !ok {
		t.Error("the control-plane server is gone after refused deletes")
	}
}

// TestForceDeleteNodes deletes below the min size, which DeleteNodes
// refuses.
func TestForceDeleteNodes(t *testing.T) {
	e := newEnv(t)
	arm, _ := e.fake.ServerByID(e.armServer)
	g := e.group("arm")
	if err := g.ForceDeleteNodes([]*apiv1.Node{node(arm)}); err != nil {
		t.Fatalf("ForceDeleteNodes(the only server at min size 1): %v", err)
	}
	if got := e.targetSize(g); got != 0 {
		t.Errorf("TargetSize after ForceDeleteNodes = %d; want 0", got)
	}
}

// TestTemplateNodeInfo checks that the NodeInfo holds the pool's template
// node unchanged and no pods.
func TestTemplateNodeInfo(t *testing.T) {
	e := newEnv(t)
	g := e.group("workers")
	ni, err := g.TemplateNodeInfo()
	if err != nil {
		t.Fatalf("TemplateNodeInfo: %v", err)
	}
	want, err := g.(*NodeGroup).Pool().TemplateNode(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ni.Node()); diff != "" {
		t.Errorf("template node (-want +got):\n%s", diff)
	}
	if n := len(ni.Pods()); n != 0 {
		t.Errorf("template pods = %d; want 0 (the autoscaler adds DaemonSet pods)", n)
	}

	// What the scheduler simulation reads, spelled out.
	n := ni.Node()
	for k, v := range map[string]string{
		"role":                             "worker",
		config.LabelNodeGroup:              "workers",
		"node.kubernetes.io/instance-type": "cpx21",
		"topology.kubernetes.io/region":    "fsn1",
		"kubernetes.io/arch":               "amd64",
	} {
		if got := n.Labels[k]; got != v {
			t.Errorf("label %s = %q; want %q", k, got, v)
		}
	}
	wantTaints := []apiv1.Taint{{Key: "dedicated", Value: "workers", Effect: apiv1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTaints, n.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if got := n.Status.Capacity[apiv1.ResourceCPU]; got.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("cpu capacity = %s; want 3 (cpx21)", got.String())
	}
	for _, r := range []apiv1.ResourceName{apiv1.ResourceCPU, apiv1.ResourceMemory} {
		c, a := n.Status.Capacity[r], n.Status.Allocatable[r]
		if a.IsZero() || a.Cmp(c) >= 0 {
			t.Errorf("%s allocatable = %s, capacity %s; want 0 < allocatable < capacity", r, a.String(), c.String())
		}
	}
}

// TestGetOptions checks that a pool without autoscaling settings answers
// nil (the autoscaler's defaults) and one with settings answers the
// defaults with its settings laid over them.
func TestGetOptions(t *testing.T) {
	e := newEnv(t)
	defaults := caconfig.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    0.5,
		ScaleDownGpuUtilizationThreshold: 0.5,
		ScaleDownUnneededTime:            10 * time.Minute,
		ScaleDownUnreadyTime:             20 * time.Minute,
		MaxNodeProvisionTime:             15 * time.Minute,
		MaxNodeStartupTime:               15 * time.Minute,
		AllowNonAtomicScaleUpToMax:       true,
	}
	batch := defaults
	batch.ScaleDownUtilizationThreshold = 0.7
	batch.ScaleDownUnneededTime = 20 * time.Minute
	batch.IgnoreDaemonSetsUtilization = true
	tests := []struct {
		group string
		want  *caconfig.NodeGroupAutoscalingOptions
	}{
		{"workers", nil},
		{"batch", &batch},
	}
	for _, tt := range tests {
		t.Run(tt.group, func(t *testing.T) {
			got, err := e.group(tt.group).GetOptions(defaults)
			if err != nil {
				t.Fatalf("GetOptions: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GetOptions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNotImplemented checks that auto-provisioning answers the
// autoscaler's sentinel itself, which it compares by identity, and
// changes nothing.
func TestNotImplemented(t *testing.T) {
	e := newEnv(t)
	g := e.group("workers")
	requests := len(e.fake.Requests())
	tests := []struct {
		name string
		call func() (any, error)
	}{
		{"NewNodeGroup", func() (any, error) {
			return e.provider.NewNodeGroup("cpx31", map[string]string{"a": "b"}, nil, nil, nil)
		}},
		{"Create", func() (any, error) { return g.Create() }},
		{"Delete", func() (any, error) { return nil, g.Delete() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			// The autoscaler compares by identity, not with errors.Is.
			if err != cloudprovider.ErrNotImplemented {
				t.Errorf("%s error = %v; want cloudprovider.ErrNotImplemented itself", tt.name, err)
			}
			if ng, ok := got.(cloudprovider.NodeGroup); ok && ng != nil {
				t.Errorf("%s returned node group %v; want nil", tt.name, ng)
			}
		})
	}
	if n := len(e.provider.NodeGroups()); n != 3 {
		t.Errorf("node groups after the calls = %d; want 3", n)
	}
	if !g.Exist() || g.Autoprovisioned() {
		t.Errorf("Exist() = %t, Autoprovisioned() = %t; want true, false", g.Exist(), g.Autoprovisioned())
	}
	if n := len(e.fake.Requests()) - requests; n != 0 {
		t.Errorf("the calls sent %d requests; want none", n)
	}
}
