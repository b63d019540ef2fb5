package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestKubeletWithhold(t *testing.T) {
	ctx := context.Background()
	api := hcloudtest.NewServer()
	t.Cleanup(api.Close)
	client := fake.NewClientset()
	k := NewKubelet(api, client, "", map[string]KubeletPool{"w": {}})
	k.Withhold("w", 1)
	add := func(name string) int64 {
		t.Helper()
		id, err := api.AddServer(hcloudtest.ServerInfo{Name: name, Labels: map[string]string{ServerLabelNodeGroup: "w"}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	registered := func() map[string]bool {
		t.Helper()
		if err := k.Step(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, n := range l.Items {
			out[n.Name] = true
		}
		return out
	}
	first := add("w-1")
	if got := registered(); len(got) != 0 {
		t.Fatalf("nodes %v, want none: the first server is withheld", got)
	}
	add("w-2")
	for range 3 {
		if got := registered(); len(got) != 1 || !got["w-2"] {
			t.Fatalf("nodes %v, want only w-2", got)
		}
	}
	if ids := k.Withheld(); len(ids) != 1 || ids[0] != first {
		t.Errorf("Withheld() = %v, want [%d]", ids, first)
	}
}

func TestKubeletNode(t *testing.T) {
	ctx := context.Background()
	api := hcloudtest.NewServer()
	t.Cleanup(api.Close)
	client := fake.NewClientset()
	k := NewKubelet(api, client, "", map[string]KubeletPool{
		"arm": {NodeLabels: map[string]string{"role": "batch"}, Taints: []corev1.Taint{batchTaint}},
	})
	id, err := api.AddServer(hcloudtest.ServerInfo{Name: "arm-1", ServerType: "cax11", Location: "hel1",
		Labels: map[string]string{ServerLabelNodeGroup: "arm"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.AddServer(hcloudtest.ServerInfo{Name: "cp-1"}); err != nil {
		t.Fatal(err)
	}
	step := func() {
		t.Helper()
		if err := k.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes, want 1 (the server of no pool has none)", len(nodes.Items))
	}
	n := nodes.Items[0]
	for key, want := range map[string]string{
		"kubernetes.io/hostname": "arm-1", "kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "cax11",
		"topology.kubernetes.io/zone": "hel1-dc2", "topology.kubernetes.io/region": "hel1", "role": "batch",
	} {
		if got := n.Labels[key]; got != want {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
	}
	if want := "hcloud://" + strconv.FormatInt(id, 10); n.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", n.Spec.ProviderID, want)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != batchTaint {
		t.Errorf("taints %v, want [%v]", n.Spec.Taints, batchTaint)
	}
	// cax11: 4 GB advertised; the guest sees 95% less 100 MiB, and 100 Mi
	// more are kept for eviction.
	mem := n.Status.Allocatable[corev1.ResourceMemory]
	if lo, hi := resource.MustParse("3400Mi"), resource.MustParse("3700Mi"); mem.Cmp(lo) < 0 || mem.Cmp(hi) > 0 {
		t.Errorf("allocatable memory %s, want between 3400Mi and 3700Mi", mem.String())
	}
	if !ready(&n) {
		t.Error("node not Ready")
	}

	if err := api.SetServerStatus(id, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	step()
	got, _ := client.CoreV1().Nodes().Get(ctx, "arm-1", metav1.GetOptions{})
	if ready(got) {
		t.Error("node Ready while its server is off")
	}
	if err := api.SetServerStatus(id, hcloud.ServerStatusRunning); err != nil {
		t.Fatal(err)
	}
	step()
	got, _ = client.CoreV1().Nodes().Get(ctx, "arm-1", metav1.GetOptions{})
	if !ready(got) {
		t.Error("node not Ready again while its server runs")
	}

	api.DeleteServerNow(id)
	step()
	if nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Errorf("%d nodes after the server was deleted, want 0", len(nodes.Items))
	}
}

func TestKubeletDelay(t *testing.T) {
	ctx := context.Background()
	api := hcloudtest.NewServer()
	t.Cleanup(api.Close)
	client := fake.NewClientset()
	k := NewKubelet(api, client, "", map[string]KubeletPool{"w": {}})
	k.SetRegisterDelay("w", 200*time.Millisecond)
	if _, err := api.AddServer(hcloudtest.ServerInfo{Name: "w-1", Labels: map[string]string{ServerLabelNodeGroup: "w"}}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		if err := k.Step(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return len(l.Items)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d nodes at once, want 0 before the delay", n)
	}
	time.Sleep(250 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("%d nodes after the delay, want 1", n)
	}
}

func TestScheduler(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	mk := func(name string, labels map[string]string, taints []corev1.Taint, cpu string, isReady bool) {
		t.Helper()
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{readyCondition(isReady, time.Now())},
			},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("a-tainted", map[string]string{"role": "batch"}, []corev1.Taint{batchTaint}, "2", true)
	mk("b-small", map[string]string{"role": "web"}, nil, "2", true)
	mk("c-unready", map[string]string{"role": "web"}, nil, "8", false)
	for _, p := range []*corev1.Pod{
		Pod("p1-web", "1500m", "1Gi"),                                                        // a is tainted: b
		Pod("p2-web", "1500m", "1Gi"),                                                        // b is full, c unready: pending
		Pod("p3-batch", "1", "1Gi", WithToleration("dedicated", "batch")),                    // tolerates a: a
		Pod("p4-selector", "100m", "1Gi", WithNodeSelector(map[string]string{"role": "db"})), // no node: pending
	} {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // creation order decides first fit
	}
	if err := NewScheduler(client).Step(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"p1-web": "b-small", "p2-web": "", "p3-batch": "a-tainted", "p4-selector": ""}
	pods, _ := client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Spec.NodeName != want[p.Name] {
			t.Errorf("pod %s on %q, want %q", p.Name, p.Spec.NodeName, want[p.Name])
		}
	}

	// A pod whose node is gone goes back to pending.
	if err := client.CoreV1().Nodes().Delete(ctx, "b-small", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := NewScheduler(client).Step(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "p1-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("pod of a deleted node on %q, want pending", p.Spec.NodeName)
	}
}
