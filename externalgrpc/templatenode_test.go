package externalgrpc_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// TestTemplateCopyOfAGoneServer follows a template the autoscaler built
// from a real node of the arm pool: it keeps the node's provider ID and
// labels (which carry no pool label here, as on a node registered by a
// kubelet) and is renamed template-node-for-arm-<random>. After the
// pool's server is deleted, the copy must still map to the pool and have
// its price, or the price expander never picks the pool again.
func TestTemplateCopyOfAGoneServer(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, _, armHourly := e.catalogue("cax11", "hel1")
	name := "template-node-for-arm-8674665223082153551"
	copyOf := func(name string) *protos.ExternalGrpcNode {
		return &protos.ExternalGrpcNode{
			ProviderID: "hcloud://" + strconv.FormatInt(e.armServer, 10),
			Name:       name,
			Labels: map[string]string{
				"kubernetes.io/hostname":                         name,
				"node.kubernetes.io/instance-type":               "cax11",
				"cluster-autoscaler.kubernetes.io/template-node": "true",
			},
		}
	}
	armGroup := &protos.NodeGroup{Id: "arm", MinSize: 1, MaxSize: 3, Debug: "arm (cax11 in hel1, min 1, max 3)"}

	if !e.fake.DeleteServerNow(e.armServer) {
		t.Fatal("the arm server did not exist")
	}
	e.clock.Advance(time.Hour)
	if _, err := e.client.Refresh(e.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := e.targetSize("arm"); got != 0 {
		t.Fatalf("arm target size after its server was deleted = %d; want 0", got)
	}

	for _, n := range []*protos.ExternalGrpcNode{
		copyOf(name),
		// The simulation's copies of the template add a suffix.
		copyOf(name + "-upcoming-0"),
		// A pool label on the copy decides, whatever the name.
		func() *protos.ExternalGrpcNode {
			n := copyOf("renamed")
			n.Labels[config.LabelNodeGroup] = "arm"
			return n
		}(),
	} {
		res, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: n})
		if err != nil {
			t.Fatalf("NodeGroupForNode(%s): %v", n.GetName(), err)
		}
		if diff := cmp.Diff(armGroup, res.GetNodeGroup(), protocmp.Transform()); diff != "" {
			t.Errorf("NodeGroupForNode(%s) (-want +got):\n%s", n.GetName(), diff)
		}
		price, err := e.client.PricingNodePrice(e.ctx(), &protos.PricingNodePriceRequest{Node: n,
			StartTimestamp: timestamppb.New(epoch), EndTimestamp: timestamppb.New(epoch.Add(3 * time.Hour))})
		if err != nil {
			t.Fatalf("PricingNodePrice(%s): %v", n.GetName(), err)
		}
		if !approx(price.GetPrice(), 3*armHourly) {
			t.Errorf("PricingNodePrice(%s) = %v; want %v", n.GetName(), price.GetPrice(), 3*armHourly)
		}
	}

	// Neither the name pattern without the template label, nor the label
	// with a name of no pool, maps a node.
	for _, n := range []*protos.ExternalGrpcNode{
		{ProviderID: "hcloud://999999", Name: name},
		{ProviderID: "hcloud://999999", Name: "template-node-for-armada-1",
			Labels: map[string]string{"cluster-autoscaler.kubernetes.io/template-node": "true"}},
		{ProviderID: "hcloud://999999", Name: "template-node-for-arm-x1",
			Labels: map[string]string{"cluster-autoscaler.kubernetes.io/template-node": "true"}},
	} {
		res, err := e.client.NodeGroupForNode(e.ctx(), &protos.NodeGroupForNodeRequest{Node: n})
		if err != nil {
			t.Fatalf("NodeGroupForNode(%s): %v", n.GetName(), err)
		}
		if got := res.GetNodeGroup().GetId(); got != "" {
			t.Errorf("NodeGroupForNode(%s, labels %v) = %q; want no group", n.GetName(), n.GetLabels(), got)
		}
	}
}
