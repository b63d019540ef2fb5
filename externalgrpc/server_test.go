package externalgrpc_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestScaleUpAndDelete drives one pool through a whole life cycle: the
// scale-up call returns while the fake still initializes the servers,
// instances go creating -> running as the fake's clock moves, and a
// delete leaves no server behind.
func TestScaleUpAndDelete(t *testing.T) {
	e := newEnv(t, envOptions{})

	start := time.Now()
	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 2}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize: %v", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("NodeGroupIncreaseSize took %s; want well under the autoscaler's 5 s deadline", elapsed)
	}
	if got := e.targetSize("workers"); got != 2 {
		t.Errorf("target size right after the increase = %d; want 2", got)
	}
	if got := states(e.nodes("workers")); !cmp.Equal(got, map[string]int{"instanceCreating": 2}) {
		t.Errorf("instances right after the increase = %v; want 2 creating", got)
	}

	// The background creates reach the fake, whose clock has not moved:
	// the servers exist but are still initializing.
	e.eventually("two create requests", 0, func() bool { return e.fake.Count("POST /servers") == 2 })
	for _, s := range e.servers("workers") {
		if s.Status != hcloud.ServerStatusInitializing {
			t.Errorf("server %s status = %s while the clock stands still; want initializing", s.Name, s.Status)
		}
	}
	if got := states(e.nodes("workers")); !cmp.Equal(got, map[string]int{"instanceCreating": 2}) {
		t.Errorf("instances while the servers initialize = %v; want 2 creating", got)
	}

	e.eventually("both instances running", 100*time.Millisecond, func() bool {
		return cmp.Equal(states(e.nodes("workers")), map[string]int{"instanceRunning": 2})
	})
	var wantIDs, gotIDs []string
	var nodes []*protos.ExternalGrpcNode
	for _, s := range e.servers("workers") {
		wantIDs = append(wantIDs, "hcloud://"+strconv.FormatInt(s.ID, 10))
		nodes = append(nodes, &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(s.ID, 10), Name: s.Name})
	}
	for _, in := range e.nodes("workers") {
		gotIDs = append(gotIDs, in.GetId())
	}
	if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
		t.Errorf("instance IDs (-want +got):\n%s", diff)
	}
	for _, n := range nodes {
		res, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: n})
		if err != nil || res.GetNodeGroup().GetId() != "workers" {
			t.Errorf("NodeGroupForNode(%s) = %q, %v; want workers", n.GetProviderID(), res.GetNodeGroup().GetId(), err)
		}
	}

	if _, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: nodes}); err != nil {
		t.Fatalf("NodeGroupDeleteNodes: %v", err)
	}
	if got := e.targetSize("workers"); got != 0 {
		t.Errorf("target size right after the delete = %d; want 0", got)
	}
	if got := states(e.nodes("workers")); !cmp.Equal(got, map[string]int{"instanceDeleting": 2}) {
		t.Errorf("instances right after the delete = %v; want 2 deleting", got)
	}
	e.eventually("the servers to be gone", 100*time.Millisecond, func() bool {
		return len(e.servers("workers")) == 0 && len(e.nodes("workers")) == 0
	})
}

// TestCapacityFailure checks that a sold-out offering becomes a failed
// instance of class OutOfResources (1), that the next scale-up of the pool
// fails at once, and that the autoscaler can delete the placeholder by the
// fake node it builds for it.
func TestCapacityFailure(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.fake.SetUnavailable("cpx21", "fsn1", true)

	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize: %v", err)
	}
	var failed *protos.Instance
	// The pool publishes the placeholder a moment before it remembers the
	// offering as sold out; wait for both.
	e.eventually("a failed instance", 0, func() bool {
		in := e.nodes("workers")
		if len(in) == 1 && in[0].GetStatus().GetErrorInfo() != nil && len(e.cluster.Pool("workers").Status().Unavailable) > 0 {
			failed = in[0]
			return true
		}
		return false
	})
	if got, want := failed.GetStatus().GetInstanceState(), protos.InstanceStatus_instanceCreating; got != want {
		t.Errorf("failed instance state = %s; want %s", got, want)
	}
	info := failed.GetStatus().GetErrorInfo()
	if info.GetInstanceErrorClass() != 1 || info.GetErrorCode() != "resource_unavailable" || info.GetErrorMessage() == "" {
		t.Errorf("error info = %v; want class 1, code resource_unavailable and a message", info)
	}
	if !strings.HasPrefix(failed.GetId(), "hcloudscale://workers/") {
		t.Errorf("failed instance id = %q; want a claim ID hcloudscale://workers/<name>", failed.GetId())
	}
	if n := len(e.servers("workers")); n != 0 {
		t.Errorf("servers after the failed create = %d; want 0", n)
	}

	_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1})
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Errorf("NodeGroupIncreaseSize while sold out: code %s (%v); want ResourceExhausted", got, err)
	}

	// The autoscaler's fake node for a failed instance carries its id as
	// name and provider ID.
	fakeNode := &protos.ExternalGrpcNode{ProviderID: failed.GetId(), Name: failed.GetId()}
	res, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: fakeNode})
	if err != nil || res.GetNodeGroup().GetId() != "workers" {
		t.Errorf("NodeGroupForNode(placeholder) = %q, %v; want workers", res.GetNodeGroup().GetId(), err)
	}
	if _, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*protos.ExternalGrpcNode{fakeNode}}); err != nil {
		t.Fatalf("NodeGroupDeleteNodes(placeholder): %v", err)
	}
	if in := e.nodes("workers"); len(in) != 0 {
		t.Errorf("instances after deleting the placeholder = %v; want none", in)
	}
	if got := e.targetSize("workers"); got != 0 {
		t.Errorf("target size after deleting the placeholder = %d; want 0", got)
	}
}

// TestDecreaseTargetSize removes the placeholder of a failed create, as
// the autoscaler does when an instance did not come up in time, and
// clamps a decrease that goes further instead of failing.
func TestDecreaseTargetSize(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.fake.SetUnavailable("cx23", "nbg1", true)
	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "batch", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize: %v", err)
	}
	e.eventually("a failed instance", 0, func() bool {
		return cmp.Equal(states(e.nodes("batch")), map[string]int{"instanceCreating/1": 1})
	})
	if _, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "batch", Delta: -2}); err != nil {
		t.Fatalf("NodeGroupDecreaseTargetSize(-2) with one placeholder: %v", err)
	}
	if got := e.targetSize("batch"); got != 0 {
		t.Errorf("target size after the decrease = %d; want 0", got)
	}
	if in := e.nodes("batch"); len(in) != 0 {
		t.Errorf("instances after the decrease = %v; want none", in)
	}
}

// TestStatusCodes checks the status code of every kind of bad request.
func TestStatusCodes(t *testing.T) {
	e := newEnv(t, envOptions{})
	armNode := &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.armServer, 10), Name: "arm-0000000000000001"}
	controlPlane := &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.controlPlane, 10), Name: "control-plane-1"}

	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"target size of an unknown group", func() error {
			_, err := e.client.NodeGroupTargetSize(e.ctx(), &protos.NodeGroupTargetSizeRequest{Id: "nope"})
			return err
		}, codes.NotFound},
		{"target size without an id", func() error {
			_, err := e.client.NodeGroupTargetSize(e.ctx(), &protos.NodeGroupTargetSizeRequest{})
			return err
		}, codes.NotFound},
		{"increase of an unknown group", func() error {
			_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "nope", Delta: 1})
			return err
		}, codes.NotFound},
		{"nodes of an unknown group", func() error {
			_, err := e.client.NodeGroupNodes(e.ctx(), &protos.NodeGroupNodesRequest{Id: "nope"})
			return err
		}, codes.NotFound},
		{"template of an unknown group", func() error {
			_, err := e.client.NodeGroupTemplateNodeInfo(e.ctx(), &protos.NodeGroupTemplateNodeInfoRequest{Id: "nope"})
			return err
		}, codes.NotFound},
		{"options of an unknown group", func() error {
			_, err := e.client.NodeGroupGetOptions(e.ctx(), &protos.NodeGroupAutoscalingOptionsRequest{Id: "nope"})
			return err
		}, codes.NotFound},
		{"delete in an unknown group", func() error {
			_, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "nope", Nodes: []*protos.ExternalGrpcNode{armNode}})
			return err
		}, codes.NotFound},
		{"decrease of an unknown group", func() error {
			_, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "nope", Delta: -1})
			return err
		}, codes.NotFound},
		{"negative increase", func() error {
			_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: -1})
			return err
		}, codes.InvalidArgument},
		{"zero increase", func() error {
			_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 0})
			return err
		}, codes.InvalidArgument},
		{"increase beyond the max size", func() error {
			_, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 6})
			return err
		}, codes.InvalidArgument},
		{"zero decrease", func() error {
			_, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: 0})
			return err
		}, codes.InvalidArgument},
		{"positive decrease", func() error {
			_, err := e.client.NodeGroupDecreaseTargetSize(e.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: 1})
			return err
		}, codes.InvalidArgument},
		{"delete of a node of another group", func() error {
			_, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "workers", Nodes: []*protos.ExternalGrpcNode{armNode}})
			return err
		}, codes.InvalidArgument},
		{"delete of a node of no group", func() error {
			_, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "arm", Nodes: []*protos.ExternalGrpcNode{controlPlane}})
			return err
		}, codes.InvalidArgument},
		{"delete below the min size", func() error {
			_, err := e.client.NodeGroupDeleteNodes(e.ctx(), &protos.NodeGroupDeleteNodesRequest{Id: "arm", Nodes: []*protos.ExternalGrpcNode{armNode}})
			return err
		}, codes.FailedPrecondition},
		{"node group for no node", func() error {
			_, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{})
			return err
		}, codes.InvalidArgument},
		{"options of a group without options", func() error {
			_, err := e.client.NodeGroupGetOptions(e.ctx(), &protos.NodeGroupAutoscalingOptionsRequest{Id: "workers"})
			return err
		}, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if got := status.Code(err); got != tc.want {
				t.Errorf("code = %s (%v); want %s", got, err, tc.want)
			}
		})
	}
	// Nothing of the above may have changed anything.
	if n := e.fake.Count("POST /servers") + e.fake.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("create and delete requests = %d; want 0", n)
	}
	if got := e.targetSize("arm"); got != 1 {
		t.Errorf("arm target size = %d; want 1", got)
	}
}

func TestNodeGroups(t *testing.T) {
	e := newEnv(t, envOptions{})
	res, err := e.client.NodeGroups(e.ctx(), &protos.NodeGroupsRequest{})
	if err != nil {
		t.Fatalf("NodeGroups: %v", err)
	}
	want := []*protos.NodeGroup{
		{Id: "workers", MinSize: 0, MaxSize: 5, Debug: "workers (cpx21 in fsn1, min 0, max 5)"},
		{Id: "batch", MinSize: 0, MaxSize: 3, Debug: "batch (cx23 in nbg1, min 0, max 3)"},
		{Id: "arm", MinSize: 1, MaxSize: 3, Debug: "arm (cax11 in hel1, min 1, max 3)"},
	}
	if diff := cmp.Diff(want, res.GetNodeGroups(), protocmp.Transform()); diff != "" {
		t.Errorf("NodeGroups (-want +got):\n%s", diff)
	}
}

func TestNodeGroupForNode(t *testing.T) {
	e := newEnv(t, envOptions{})
	arm := "hcloud://" + strconv.FormatInt(e.armServer, 10)
	for _, tc := range []struct {
		name string
		node *protos.ExternalGrpcNode
		want *protos.NodeGroup
	}{
		{"server by provider ID", &protos.ExternalGrpcNode{ProviderID: arm, Name: "whatever"},
			&protos.NodeGroup{Id: "arm", MinSize: 1, MaxSize: 3, Debug: "arm (cax11 in hel1, min 1, max 3)"}},
		{"server by name without provider ID", &protos.ExternalGrpcNode{Name: "arm-0000000000000001"},
			&protos.NodeGroup{Id: "arm", MinSize: 1, MaxSize: 3, Debug: "arm (cax11 in hel1, min 1, max 3)"}},
		{"server of no pool", &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.controlPlane, 10), Name: "control-plane-1"},
			&protos.NodeGroup{}},
		{"Robot server", &protos.ExternalGrpcNode{ProviderID: "hrobot://1234", Name: "arm-0000000000000001"}, &protos.NodeGroup{}},
		{"unknown server", &protos.ExternalGrpcNode{ProviderID: "hcloud://999999", Name: "other"}, &protos.NodeGroup{}},
		{"template copy", &protos.ExternalGrpcNode{Name: "template-node-for-batch-123",
			Labels: map[string]string{"cluster-autoscaler.kubernetes.io/template-node": "true", config.LabelNodeGroup: "batch"}},
			&protos.NodeGroup{Id: "batch", MinSize: 0, MaxSize: 3, Debug: "batch (cx23 in nbg1, min 0, max 3)"}},
		{"pool label on a real node is not trusted", &protos.ExternalGrpcNode{ProviderID: "hcloud://999999", Name: "other",
			Labels: map[string]string{config.LabelNodeGroup: "batch"}}, &protos.NodeGroup{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: tc.node})
			if err != nil {
				t.Fatalf("NodeGroupForNode: %v", err)
			}
			if diff := cmp.Diff(tc.want, res.GetNodeGroup(), protocmp.Transform()); diff != "" {
				t.Errorf("NodeGroupForNode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplateNodeInfo(t *testing.T) {
	e := newEnv(t, envOptions{})
	res, err := e.client.NodeGroupTemplateNodeInfo(e.ctx(), &protos.NodeGroupTemplateNodeInfoRequest{Id: "workers"})
	if err != nil {
		t.Fatalf("NodeGroupTemplateNodeInfo: %v", err)
	}
	if len(res.GetNodeBytes()) == 0 || !bytes.Equal(res.GetNodeBytes(), res.GetNodeInfo()) {
		t.Fatalf("nodeBytes (%d bytes) and legacy nodeInfo (%d bytes) differ or are empty; want the same bytes in both",
			len(res.GetNodeBytes()), len(res.GetNodeInfo()))
	}
	for field, b := range map[string][]byte{"nodeBytes": res.GetNodeBytes(), "nodeInfo": res.GetNodeInfo()} {
		var node corev1.Node
		if err := node.Unmarshal(b); err != nil {
			t.Fatalf("%s: (*v1.Node).Unmarshal: %v", field, err)
		}
		got := map[string]string{
			"pool":  node.Labels[config.LabelNodeGroup],
			"type":  node.Labels["node.kubernetes.io/instance-type"],
			"role":  node.Labels["role"],
			"cpu":   node.Status.Capacity.Cpu().String(),
			"ready": string(readyCondition(&node)),
		}
		want := map[string]string{"pool": "workers", "type": "cpx21", "role": "worker", "cpu": "3", "ready": "True"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s decoded (-want +got):\n%s", field, diff)
		}
	}
}

func readyCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func TestGetOptions(t *testing.T) {
	e := newEnv(t, envOptions{})
	const (
		unneeded  = 10 * time.Minute
		unready   = 20 * time.Minute
		provision = 15 * time.Minute
	)
	legacy := func(d time.Duration) *protos.NodeGroupAutoscalingOptions_LegacyDuration {
		return &protos.NodeGroupAutoscalingOptions_LegacyDuration{Duration: int64(d)}
	}
	// batch sets scaleDownUtilizationThreshold 0.7, scaleDownUnneededTime
	// 20m and ignoreDaemonSetsUtilization; the rest echoes the defaults.
	want := &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    0.7,
		ScaleDownGpuUtilizationThreshold: 0.5,
		ZeroOrMaxNodeScaling:             true,
		IgnoreDaemonSetsUtilization:      true,
		ScaleDownUnneededDuration:        durationpb.New(20 * time.Minute),
		ScaleDownUnreadyDuration:         durationpb.New(unready),
		MaxNodeProvisionDuration:         durationpb.New(provision),
		ScaleDownUnneededTime:            legacy(20 * time.Minute),
		ScaleDownUnreadyTime:             legacy(unready),
		MaxNodeProvisionTime:             legacy(provision),
	}
	for _, tc := range []struct {
		name     string
		defaults *protos.NodeGroupAutoscalingOptions
	}{
		{"current client (1.35+): google.protobuf.Duration only", &protos.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5, ZeroOrMaxNodeScaling: true,
			ScaleDownUnneededDuration: durationpb.New(unneeded), ScaleDownUnreadyDuration: durationpb.New(unready),
			MaxNodeProvisionDuration: durationpb.New(provision),
		}},
		{"old client (<= 1.34.1): legacy nanosecond durations only", &protos.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5, ZeroOrMaxNodeScaling: true,
			ScaleDownUnneededTime: legacy(unneeded), ScaleDownUnreadyTime: legacy(unready), MaxNodeProvisionTime: legacy(provision),
		}},
		{"transition client (1.34.2+): both, the current ones win", &protos.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5, ZeroOrMaxNodeScaling: true,
			ScaleDownUnneededDuration: durationpb.New(unneeded), ScaleDownUnreadyDuration: durationpb.New(unready),
			MaxNodeProvisionDuration: durationpb.New(provision),
			ScaleDownUnneededTime:    legacy(time.Hour), ScaleDownUnreadyTime: legacy(time.Hour), MaxNodeProvisionTime: legacy(time.Hour),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.client.NodeGroupGetOptions(e.ctx(), &protos.NodeGroupAutoscalingOptionsRequest{Id: "batch", Defaults: tc.defaults})
			if err != nil {
				t.Fatalf("NodeGroupGetOptions: %v", err)
			}
			if diff := cmp.Diff(want, res.GetNodeGroupAutoscalingOptions(), protocmp.Transform()); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFixedAnswers(t *testing.T) {
	e := newEnv(t, envOptions{})
	gpu, err := e.client.GPULabel(e.ctx(), &protos.GPULabelRequest{})
	if err != nil || gpu.GetLabel() != externalgrpc.GPULabel {
		t.Errorf("GPULabel = %q, %v; want %q", gpu.GetLabel(), err, externalgrpc.GPULabel)
	}
	types, err := e.client.GetAvailableGPUTypes(e.ctx(), &protos.GetAvailableGPUTypesRequest{})
	if err != nil || len(types.GetGpuTypes()) != 0 {
		t.Errorf("GetAvailableGPUTypes = %v, %v; want none, no error", types.GetGpuTypes(), err)
	}
	if _, err := e.client.Cleanup(e.ctx(), &protos.CleanupRequest{}); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	// Cleanup must not stop the pools: the autoscaler restarts, the
	// server stays.
	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "batch", Delta: 1}); err != nil {
		t.Errorf("NodeGroupIncreaseSize after Cleanup: %v", err)
	}
}

func TestRefresh(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := e.fake.Count("GET /servers")
	if _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := e.fake.Count("GET /servers"); got != before {
		t.Errorf("server listings by a Refresh within the TTL = %d; want 0", got-before)
	}

	// A server that appears behind our back shows after the TTL.
	id, err := e.fake.AddServer(armServer("arm-0000000000000002"))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh after the TTL: %v", err)
	}
	if got := e.fake.Count("GET /servers"); got <= before {
		t.Errorf("server listings by a Refresh after the TTL = %d; want at least 1", got-before)
	}
	if got := e.targetSize("arm"); got != 2 {
		t.Errorf("arm target size after Refresh = %d; want 2 (server %d added)", got, id)
	}
}

// states counts instances by state, failed ones as "<state>/<class>".
func states(in []*protos.Instance) map[string]int {
	m := map[string]int{}
	for _, i := range in {
		k := i.GetStatus().GetInstanceState().String()
		if e := i.GetStatus().GetErrorInfo(); e != nil {
			k += "/" + strconv.Itoa(int(e.GetInstanceErrorClass()))
		}
		m[k]++
	}
	return m
}

func TestInterceptorMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	for range 2 {
		_, _ = e.client.NodeGroupTargetSize(e.ctx(), &protos.NodeGroupTargetSizeRequest{Id: "nope"})
	}
	_ = e.targetSize("workers")
	want := `
# HELP hcloudscale_externalgrpc_requests_total Calls of the autoscaler's externalgrpc service by method and gRPC status code.
# TYPE hcloudscale_externalgrpc_requests_total counter
hcloudscale_externalgrpc_requests_total{code="NotFound",method="NodeGroupTargetSize"} 2
hcloudscale_externalgrpc_requests_total{code="OK",method="NodeGroupTargetSize"} 1
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "hcloudscale_externalgrpc_requests_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(e.reg, "hcloudscale_externalgrpc_request_duration_seconds"); err != nil || n != 1 {
		t.Errorf("duration series = %d, %v; want 1 (one method)", n, err)
	}
}

// TestRefreshUnderTrouble checks that a slow listing does not fail the
// call (an error aborts the autoscaler's loop) while a failed one does.
func TestRefreshUnderTrouble(t *testing.T) {
	e := newEnv(t, envOptions{callTimeout: 200 * time.Millisecond})

	// The server shows in the arm pool once the slow listing is applied.
	if _, err := e.fake.AddServer(armServer("arm-0000000000000002")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour) // the listing's TTL has passed
	e.fake.SetLatency(time.Second)
	start := time.Now()
	if _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Errorf("Refresh with a slow listing: %v; want success with the previous listing", err)
	}
	if elapsed := time.Since(start); elapsed > 900*time.Millisecond {
		t.Errorf("Refresh with a slow listing took %s; want about the call timeout (200ms)", elapsed)
	}
	if got := e.targetSize("arm"); got != 1 {
		t.Errorf("arm target size before the slow listing ends = %d; want the previous listing's 1", got)
	}
	e.eventually("the slow listing to finish", 0, func() bool { return e.targetSize("arm") == 2 })
	e.fake.SetLatency(0)

	// The slow listing publishes its result before it clears its flight,
	// so a Refresh right after may still join that (successful) flight;
	// one of the next few starts a listing of its own, which fails.
	for range 3 {
		e.fake.FailRequest("GET /servers", 1, hcloudtest.RequestFault{Code: "unauthorized", Message: "unable to authenticate"})
	}
	var err error
	for range 3 {
		e.clock.Advance(time.Hour)
		if _, err = e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
			break
		}
	}
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("Refresh with a failing listing: code %s (%v); want Unavailable", got, err)
	}
	if strings.Contains(status.Convert(err).Message(), e.fake.Token()) {
		t.Errorf("Refresh error %q contains the token", err)
	}
}
