package adapter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/nodelabel"
)

// TestNodeLabeller: with WithNodeLabeller the provider labels the nodes of
// its pools until Cleanup, which waits for the labeller.
func TestNodeLabeller(t *testing.T) {
	clock := hcloudtest.NewManualClock(epoch)
	api := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(api.Close)
	id, err := api.AddServer(hcloudtest.ServerInfo{Name: "workers-1", ServerType: "cx23", Location: "fsn1", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: clusterName}})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "workers-1"},
		Spec:       corev1.NodeSpec{ProviderID: "hcloud://" + strconv.FormatInt(id, 10)},
	})
	p, err := New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
		WithEnv(testEnv(t, api, nil)),
		WithLogger(zaptest.NewLogger(t)),
		WithClusterOptions(clusterOptions(clock)...),
		WithNodeLabeller(client),
	)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var node *corev1.Node
	deadline := time.Now().Add(10 * time.Second)
	for {
		node, err = client.CoreV1().Nodes().Get(context.Background(), "workers-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Annotations[nodelabel.Annotation] == "workers" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if node.Labels["role"] != "worker" || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("node = labels %v, taints %v, annotations %v; want the workers pool's", node.Labels, node.Spec.Taints, node.Annotations)
	}
	if err := p.Cleanup(); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
}
