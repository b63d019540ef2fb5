package externalgrpc_test

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// TestReconfiguredPoolsOverTheWire changes the Cluster's configuration
// under a running server: the node groups follow from the next call.
func TestReconfiguredPoolsOverTheWire(t *testing.T) {
	e := newEnv(t, envOptions{})
	group := func(id string) *protos.NodeGroup {
		res, err := e.client.NodeGroups(e.ctx(), &protos.NodeGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range res.GetNodeGroups() {
			if g.GetId() == id {
				return g
			}
		}
		return nil
	}
	if group("extra") != nil {
		t.Fatal("extra before the change")
	}

	// arm (one server) leaves the configuration, extra joins it, workers'
	// max goes from 5 to 2.
	cc := clusterConfig()
	nodes := cc["nodeConfigs"].(map[string]any)
	delete(nodes, "arm")
	nodes["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 4}
	doc, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.MapEnv(map[string]string{
		config.EnvToken:         e.fake.Token(),
		config.EnvEndpoint:      e.fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil), []string{"0:2:cpx21:fsn1:workers", "0:3:cx23:nbg1:batch"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.Reconfigure(e.ctx(), cfg); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}

	res, err := e.client.NodeGroups(e.ctx(), &protos.NodeGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type ng struct {
		ID, Debug        string
		MinSize, MaxSize int32
	}
	var got []ng
	for _, g := range res.GetNodeGroups() {
		got = append(got, ng{g.GetId(), g.GetDebug(), g.GetMinSize(), g.GetMaxSize()})
	}
	want := []ng{
		{"workers", "workers (cpx21 in fsn1, min 0, max 2)", 0, 2},
		{"batch", "batch (cx23 in nbg1, min 0, max 3)", 0, 3},
		{"extra", "extra (cx33 in nbg1, min 0, max 4)", 0, 4},
		{"arm", "arm (cax11 in hel1, min 0, max 0)", 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeGroups after the change (-want +got):\n%s", diff)
	}

	armNode := &protos.ExternalGrpcNode{ProviderID: "hcloud://" + strconv.FormatInt(e.armServer, 10), Name: "arm-0000000000000001"}
	if r, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: armNode}); err != nil || r.GetNodeGroup().GetId() != "arm" {
		t.Errorf("NodeGroupForNode of the removed pool's server = %q, %v; want arm", r.GetNodeGroup().GetId(), err)
	}
	_, err = e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "arm", Delta: 1})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("NodeGroupIncreaseSize of the removed pool = %v; want FailedPrecondition", err)
	}
	if _, err := e.client.NodeGroupTargetSize(e.ctx(), &protos.NodeGroupTargetSizeRequest{Id: "extra"}); err != nil {
		t.Errorf("NodeGroupTargetSize of the added pool: %v", err)
	}
	_, err = e.client.NodeGroupGetOptions(e.ctx(), &protos.NodeGroupAutoscalingOptionsRequest{Id: "extra", Defaults: &protos.NodeGroupAutoscalingOptions{}})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("NodeGroupGetOptions of the added pool without options = %v; want Unimplemented", err)
	}
	if _, err := e.client.NodeGroupGetOptions(e.ctx(), &protos.NodeGroupAutoscalingOptionsRequest{Id: "batch", Defaults: &protos.NodeGroupAutoscalingOptions{}}); err != nil {
		t.Errorf("NodeGroupGetOptions of batch: %v", err)
	}
	_, err = e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 3})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("NodeGroupIncreaseSize(workers, 3) over the new max 2 = %v; want InvalidArgument", err)
	}
}
