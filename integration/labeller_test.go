package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/nodelabel"
)

// labelledConfig gives the pool a label only the labeller can set (the
// kubelet may not set node-role.kubernetes.io/*), another label and a
// taint.
const labelledConfig = `{"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
  "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n",
    "labels": {"node-role.kubernetes.io/worker": "", "example.com/pool": "workers"},
    "taints": [{"key": "dedicated", "value": "workers", "effect": "NoSchedule"}]}}}`

// TestLabellerOnRealNodes scales the pool up through the leader, then
// registers a Node for each server (as the kubelet would, with the
// provider ID the cloud controller manager sets) and one Node of a server
// no pool knows. Both replicas run the labeller with the example
// manifests' ClusterRole: the pool's nodes get the labels, the taint and
// the annotation; the other node is left alone; nothing is refused.
func TestLabellerOnRealNodes(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 5, createDuration: time.Second, clusterConfig: labelledConfig, labelNodes: true})
	a, _ := c.startPair(t, "")
	a.increase(t, pool, 3)
	servers := c.settle(t, 3, time.Second, 30*time.Second)
	if len(servers) != 3 {
		t.Fatalf("%d servers; want 3", len(servers))
	}

	admin := c.api.AdminClient(t)
	created := map[string]time.Time{}
	nodes := []*corev1.Node{{
		ObjectMeta: metav1.ObjectMeta{Name: c.ns + "-stranger"},
		Spec:       corev1.NodeSpec{ProviderID: "hcloud://99999999"},
	}}
	for _, s := range servers {
		nodes = append(nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name},
			Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", s.ID)},
		})
	}
	for _, n := range nodes {
		if _, err := admin.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created[n.Name] = time.Now()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = admin.CoreV1().Nodes().Delete(t.Context(), n.Name, metav1.DeleteOptions{})
		}
	})

	// Wait for the pool's nodes, at most 20 s.
	labelled := map[string]time.Duration{}
	deadline := time.Now().Add(20 * time.Second)
	for len(labelled) < len(servers) && time.Now().Before(deadline) {
		for _, s := range servers {
			if _, ok := labelled[s.Name]; ok {
				continue
			}
			n, err := admin.CoreV1().Nodes().Get(t.Context(), s.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Annotations[nodelabel.Annotation] != "" {
				labelled[s.Name] = time.Since(created[s.Name])
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var slowest time.Duration
	for _, s := range servers {
		d, ok := labelled[s.Name]
		if !ok {
			t.Errorf("node %s has no %s annotation 20s after it registered", s.Name, nodelabel.Annotation)
			continue
		}
		slowest = max(slowest, d)
		n, err := admin.CoreV1().Nodes().Get(t.Context(), s.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := n.Labels["node-role.kubernetes.io/worker"]; !ok || v != "" {
			t.Errorf("node %s labels %v; want node-role.kubernetes.io/worker=\"\"", s.Name, n.Labels)
		}
		if n.Labels["example.com/pool"] != "workers" {
			t.Errorf("node %s labels %v; want example.com/pool=workers", s.Name, n.Labels)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
			return tn.Key == "dedicated" && tn.Value == "workers" && tn.Effect == corev1.TaintEffectNoSchedule
		}) {
			t.Errorf("node %s taints %v; want dedicated=workers:NoSchedule", s.Name, n.Spec.Taints)
		}
	}
	t.Logf("labelled %d nodes; the slowest %s after it registered", len(labelled), slowest.Round(time.Millisecond))

	// Give the labellers a moment more for the stranger, which they must
	// leave alone.
	time.Sleep(time.Second)
	n, err := admin.CoreV1().Nodes().Get(t.Context(), nodes[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[nodelabel.Annotation]; ok || n.Labels["example.com/pool"] != "" {
		t.Errorf("node %s of no pool was changed: labels %v, annotations %v", n.Name, n.Labels, n.Annotations)
	}
	c.verify(t, 3)
}
