package nodesim_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/nodesim"
)

// TestNodesOfServers drives the API through client-go as the lifecycle
// does: the kubelets follow the servers, patches change nodes, and what
// the simulated cluster lacks is empty or NotFound.
func TestNodesOfServers(t *testing.T) {
	api, kube, client, id := newCluster(t)
	ctx := t.Context()
	n, err := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if err != nil || n.Spec.ProviderID != "hcloud://"+itoa(id) || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != "True" {
		t.Fatalf("node w1 = %+v, %v; want Ready with the server's provider ID", n, err)
	}
	for _, p := range []struct {
		typ  types.PatchType
		body string
	}{
		{types.MergePatchType, `{"metadata":{"annotations":{"a":"1","b":"2"}}}`},
		{types.MergePatchType, `{"metadata":{"annotations":{"b":null}}}`},
		{types.StrategicMergePatchType, `{"spec":{"unschedulable":true}}`},
	} {
		if _, err := client.CoreV1().Nodes().Patch(ctx, "w1", p.typ, []byte(p.body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch %s: %v", p.body, err)
		}
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if len(n.Annotations) != 1 || n.Annotations["a"] != "1" || !n.Spec.Unschedulable || n.Spec.ProviderID == "" {
		t.Errorf("after the patches: annotations %v, unschedulable %t, provider ID %q; want a=1 only, true, kept", n.Annotations, n.Spec.Unschedulable, n.Spec.ProviderID)
	}
	if err := api.SetServerStatus(id, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	servers, _ := api.Servers("")
	kube.Sync(servers)
	if nodes := kube.Nodes(); len(nodes) != 1 || nodes[0].Status.Conditions[0].Status != "False" {
		t.Errorf("nodes of a stopped server = %+v; want w1 NotReady", nodes)
	}
	api.DeleteServerNow(id)
	kube.Sync(nil)
	if _, err := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node of a deleted server: error %v; want NotFound", err)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=w1"})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods = %v, %v; want none", pods, err)
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(pdbs.Items) != 0 {
		t.Errorf("budgets = %v, %v; want none", pdbs, err)
	}
	leases, err := client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("leases = %v, %v; want none", leases, err)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "hcloudscale", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease kube-system/hcloudscale: error %v; want NotFound", err)
	}
	if _, err := client.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("secrets: error %v; want NotFound (not served)", err)
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// TestWatchNodes watches the nodes from a listing's resourceVersion, as an
// informer does, and from the start: each sees the changes in order.
func TestWatchNodes(t *testing.T) {
	api, kube, client, id := newCluster(t)
	ctx := t.Context()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fromList, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer fromList.Stop()
	fromStart, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fromStart.Stop()
	if _, err := client.CoreV1().Nodes().Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	api.DeleteServerNow(id)
	kube.Sync(nil)
	for name, w := range map[string]watch.Interface{"from the listing": fromList, "from the start": fromStart} {
		want := []watch.EventType{watch.Modified, watch.Deleted}
		if name == "from the start" {
			want = append([]watch.EventType{watch.Added}, want...)
		}
		for i, typ := range want {
			select {
			case e := <-w.ResultChan():
				n, ok := e.Object.(*corev1.Node)
				if e.Type != typ || !ok || n.Name != "w1" || (i > 0 && !n.Spec.Unschedulable) {
					t.Errorf("watch %s: event %d = %s %+v; want %s of w1", name, i, e.Type, e.Object, typ)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %s: no event %d (%s) in 10s", name, i, typ)
			}
		}
	}
}

// TestInformer runs a client-go informer on the nodes, as serve
// --replace-nodes and --label-nodes do: it syncs at once (a streaming
// list ends with its bookmark) and sees a patch.
func TestInformer(t *testing.T) {
	_, _, client, _ := newCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	informer := nodes.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync in 5s")
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if n, err := nodes.Lister().Get("w1"); err == nil && n.Spec.Unschedulable {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer did not see the patch in 5s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// newCluster starts a fake Hetzner API with the running server w1 and a
// simulated cluster that has its node, and returns them with a client of
// the cluster and w1's ID.
func newCluster(t *testing.T) (*hcloudtest.Server, *nodesim.Server, kubernetes.Interface, int64) {
	t.Helper()
	api := hcloudtest.NewServer()
	t.Cleanup(api.Close)
	kube := nodesim.NewServer()
	t.Cleanup(kube.Close)
	client, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}
	id, err := api.AddServer(hcloudtest.ServerInfo{Name: "w1", ServerType: "cx23", Location: "fsn1"})
	if err != nil {
		t.Fatal(err)
	}
	servers, _ := api.Servers("")
	kube.Sync(servers)
	return api, kube, client, id
}
