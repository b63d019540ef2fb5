package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// BenchmarkPlan5000 plans a pool of 5,000 nodes that have all expired:
// one starts (maxInFlight 1), 4,999 are blocked by the budget. It reports
// the Hetzner requests of a plan (the listing is fresh: none), and checks
// that the plan sees every node.
//
//	go test -run '^$' -bench BenchmarkPlan5000 -benchmem ./lifecycle/
func BenchmarkPlan5000(b *testing.B) {
	const n = 5000
	api := hcloudtest.NewServer()
	defer api.Close()
	kube := fake.NewClientset()
	created := time.Now().Add(-48 * time.Hour)
	for i := range n {
		name := fmt.Sprintf("workers-%05d", i)
		id, err := api.AddServer(hcloudtest.ServerInfo{Name: name, Created: created,
			Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"}})
		if err != nil {
			b.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Load(clusterConfigWith(api, map[string]any{"expireAfter": "24h"}), []string{"0:6000:cx23:fsn1:workers"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := hcloudscale.New(context.Background(), cfg, hcloudscale.WithListTTL(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	ctrl, err := lifecycle.New(c, kube)
	if err != nil {
		b.Fatal(err)
	}
	defer ctrl.Close()
	ctx := context.Background()
	if _, err := ctrl.Plan(ctx); err != nil { // the catalogue and images, once
		b.Fatal(err)
	}
	before := len(api.Requests())
	var p *lifecycle.Plan
	for b.Loop() {
		if p, err = ctrl.Plan(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(api.Requests())-before)/float64(b.N), "hetzner-requests/op")
	if len(p.Steps) != n || p.Count(lifecycle.StateStart) != 1 {
		b.Fatalf("plan: %d steps, %d start; want %d and 1", len(p.Steps), p.Count(lifecycle.StateStart), n)
	}
}

func clusterConfigWith(api *hcloudtest.Server, replace map[string]any) config.Env {
	e := clusterConfig("#cloud-config\n", replace, nil)
	v, _ := e.Lookup("HCLOUD_CLUSTER_CONFIG")
	return config.MapEnv(map[string]string{"HCLOUD_TOKEN": api.Token(), "HCLOUD_ENDPOINT": api.URL(), "HCLOUD_CLUSTER_CONFIG": v}, nil)
}
