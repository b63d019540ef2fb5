package adapter

import (
	"math"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-autoscaler/pkg/simulator"
	"sigs.k8s.io/cluster-autoscaler/pkg/simulator/framework"
	"sigs.k8s.io/cluster-autoscaler/pkg/utils/taints"
)

// TestTemplateCopyOfAGoneServer builds a template from a real ready node
// of the arm pool with the autoscaler's own function, as it does for a
// group with a ready node: a renamed copy that keeps the provider ID. Once
// the server is gone that provider ID names nothing, yet the template must
// still map to its pool and have its price.
func TestTemplateCopyOfAGoneServer(t *testing.T) {
	e := newEnv(t)
	arm := mustServer(t, e, e.armServer)
	real := node(arm)
	real.Labels = map[string]string{apiv1.LabelHostname: arm.Name, apiv1.LabelInstanceTypeStable: "cax11"}
	real.Status.Conditions = []apiv1.NodeCondition{{Type: apiv1.NodeReady, Status: apiv1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	tmpl, aerr := simulator.SanitizedTemplateNodeInfoFromNodeInfo(framework.NewNodeInfo(real, nil), "arm", nil, false, taints.TaintConfig{})
	if aerr != nil {
		t.Fatalf("SanitizedTemplateNodeInfoFromNodeInfo: %v", aerr)
	}
	copied := tmpl.Node()
	if copied.Spec.ProviderID != real.Spec.ProviderID {
		t.Fatalf("the autoscaler's template has provider ID %q; this test assumes it keeps %q", copied.Spec.ProviderID, real.Spec.ProviderID)
	}
	// The simulation's further copies add a suffix to the name.
	again, err := simulator.SanitizedNodeInfo(tmpl, "upcoming-0")
	if err != nil {
		t.Fatalf("SanitizedNodeInfo: %v", err)
	}

	if !e.fake.DeleteServerNow(e.armServer) {
		t.Fatal("the arm server did not exist")
	}
	e.clock.Advance(time.Hour)
	if err := e.provider.Refresh(); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := e.targetSize(e.group("arm")); got != 0 {
		t.Fatalf("arm target size after its server was deleted = %d; want 0", got)
	}

	pricing, aerr := e.provider.Pricing()
	if aerr != nil {
		t.Fatalf("Pricing: %v", aerr)
	}
	hourly, err := e.provider.cluster.Pool("arm").Price(epoch, epoch.Add(time.Hour))
	if err != nil || hourly <= 0 {
		t.Fatalf("arm pool price = %v, %v", hourly, err)
	}
	for _, n := range []*apiv1.Node{copied, again.Node()} {
		g, err := e.provider.NodeGroupForNode(n)
		if err != nil || g == nil || g.Id() != "arm" {
			t.Errorf("NodeGroupForNode(%s, provider ID %s) = %v, %v; want arm", n.Name, n.Spec.ProviderID, g, err)
		}
		price, err := pricing.NodePrice(n, epoch, epoch.Add(2*time.Hour))
		if err != nil || math.Abs(price-2*hourly) > 1e-9 {
			t.Errorf("NodePrice(%s) = %v, %v; want %v", n.Name, price, err, 2*hourly)
		}
	}

	// The name alone, without the template label, maps nothing.
	impostor := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: copied.Name}, Spec: apiv1.NodeSpec{ProviderID: copied.Spec.ProviderID}}
	if g, err := e.provider.NodeGroupForNode(impostor); g != nil || err != nil {
		t.Errorf("NodeGroupForNode(node named %s without the template label) = %v, %v; want nil, nil", impostor.Name, g, err)
	}
}
