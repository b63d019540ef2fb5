package nodesim_test

import (
	"strconv"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/nodesim"
)

// TestNodesOfServers drives the API through client-go as the lifecycle
// does: the kubelets follow the servers, patches change nodes, and what
// the simulated cluster lacks is empty or NotFound.
func TestNodesOfServers(t *testing.T) {
	api := hcloudtest.NewServer()
	defer api.Close()
	kube := nodesim.NewServer()
	defer kube.Close()
	client, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, err := api.AddServer(hcloudtest.ServerInfo{Name: "w1", ServerType: "cx23", Location: "fsn1"})
	if err != nil {
		t.Fatal(err)
	}
	servers, _ := api.Servers("")
	kube.Sync(servers)
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
	servers, _ = api.Servers("")
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
