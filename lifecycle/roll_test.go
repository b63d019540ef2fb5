package lifecycle_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

var rollNodes = flag.Int("roll.nodes", 0, "run TestRollTime: roll this many nodes after a cloud-init change and report the time against its floor")

// The roll's timings: a create's action, a node's join after its server
// runs, a delete's action. Evictions end at once.
const (
	rollCreate = 5 * time.Second
	rollJoin   = time.Second
	rollDelete = 500 * time.Millisecond
	rollBatch  = 5 // maxSurge and maxInFlight, the pool's and the cluster's
)

// TestRollTime rolls -roll.nodes nodes of one pool after a change of its
// cloud-init, with the Controller's defaults (a step every
// DefaultInterval, the drain's default poll), in a testing/synctest
// bubble: the time is the bubble's. It reports the time of the roll
// against its floor, ceil(n/5) x (create + join + delete; the drain takes
// no time), and the Hetzner requests by endpoint. BENCHMARKS.md has the
// figure.
//
//	go test -run TestRollTime -roll.nodes 50 -v ./lifecycle/
func TestRollTime(t *testing.T) {
	if *rollNodes <= 0 {
		t.Skip("set -roll.nodes")
	}
	n := *rollNodes
	clk := &bubbleClock{}
	api := hcloudtest.NewServer(hcloudtest.WithClock(clk), hcloudtest.WithDefaultActionDuration(0),
		hcloudtest.WithActionDuration("create_server", rollCreate), hcloudtest.WithActionDuration("delete_server", rollDelete))
	defer api.Close()
	synctest.Test(t, func(t *testing.T) {
		clk.in.Store(true)
		defer clk.in.Store(false)
		took, requests := roll(t, api, n)
		floor := time.Duration(math.Ceil(float64(n)/rollBatch)) * (rollCreate + rollJoin + rollDelete)
		t.Logf("RESULT roll nodes=%d seconds=%.1f floor=%.1f ratio=%.2f requests=%s", n, took.Seconds(), floor.Seconds(), took.Seconds()/floor.Seconds(), requests)
	})
}

// rollTransport serves the fake API in the caller's goroutine (see
// memTransport).
type rollTransport struct{ api *hcloudtest.Server }

func (t rollTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, req)
	return rec.Result(), nil
}

func rollConfig(t *testing.T, api *hcloudtest.Server, n, version int) *config.Config {
	rc := map[string]any{"drift": []string{"user_data"}, "maxSurge": rollBatch, "maxInFlight": rollBatch}
	doc, _ := json.Marshal(map[string]any{"clusterName": "roll", "imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
		"replace":     map[string]any{"maxInFlight": rollBatch},
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": fmt.Sprintf("#cloud-config\n# version %d\n", version), "replace": rc}}})
	cfg, err := config.Load(config.MapEnv(map[string]string{"HCLOUD_TOKEN": api.Token(), "HCLOUD_ENDPOINT": api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}, nil), []string{fmt.Sprintf("0:%d:cx23:fsn1:workers", n)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// roll sets up n nodes, changes the cloud-init and steps until every old
// server is gone and n new nodes are Ready; it returns the time from the
// change and the Hetzner requests sent meanwhile.
func roll(t *testing.T, api *hcloudtest.Server, n int) (time.Duration, string) {
	ctx := context.Background()
	kube := fake.NewSimpleClientset() //nolint:staticcheck // as newKube
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, kube.Tracker().Delete(podsGVR, ev.Namespace, ev.Name) // no budget: at once
	})
	c, err := hcloudscale.New(ctx, rollConfig(t, api, n, 1), hcloudscale.WithTransport(rollTransport{api}),
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Second)})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	if err := c.Pool("workers").IncreaseSize(ctx, n); err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for len(old) < n {
		time.Sleep(time.Second)
		rollKubelet(t, api, kube, 0)
		nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, nd := range nodes.Items {
			old[nd.Name] = true
		}
	}
	logs, observed := observer.New(zap.WarnLevel)
	ctrl, err := lifecycle.New(c, kube, lifecycle.WithLogger(zap.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	if err := c.Reconfigure(ctx, rollConfig(t, api, n, 2)); err != nil {
		t.Fatal(err)
	}
	api.ResetCounts()
	start := time.Now()
	stepCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ctrl.Run(stepCtx)
	}()
	for i := 0; !rolled(t, api, kube, old, n); i++ {
		if time.Since(start) > time.Hour {
			t.Fatal("not rolled after an hour")
		}
		time.Sleep(100 * time.Millisecond)
		rollKubelet(t, api, kube, rollJoin)
	}
	took := time.Since(start)
	stop()
	<-done
	var b strings.Builder
	for _, e := range observed.All() {
		t.Logf("warning: %s %v", e.Message, e.ContextMap())
	}
	for _, tpl := range api.Templates() {
		if k := api.Count(tpl); k > 0 {
			fmt.Fprintf(&b, "%s=%d,", strings.ReplaceAll(tpl, " ", ":"), k)
		}
	}
	return took, fmt.Sprintf("%s warnings=%d", strings.TrimSuffix(b.String(), ","), observed.Len())
}

// rolled reports whether no old server is left and n servers run with a
// Ready node.
func rolled(t *testing.T, api *hcloudtest.Server, kube *fake.Clientset, old map[string]bool, n int) bool {
	all, err := api.Servers("")
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, s := range all {
		if old[s.Name] {
			return false
		}
		if nd, err := kube.CoreV1().Nodes().Get(context.Background(), s.Name, metav1.GetOptions{}); err == nil && nodeReady(nd) && s.Status == hcloud.ServerStatusRunning {
			ready++
		}
	}
	return ready == n
}

// rollKubelet registers a Ready node with one replicated pod for each
// server running for join, and removes the nodes (and pods) of servers
// that are gone.
func rollKubelet(t *testing.T, api *hcloudtest.Server, kube *fake.Clientset, join time.Duration) {
	ctx := context.Background()
	all, err := api.Servers("")
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, s := range all {
		live[s.Name] = true
		if s.Status != hcloud.ServerStatusRunning || time.Since(s.Created) < join+rollCreate {
			continue
		}
		if _, err := kube.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
			continue
		}
		nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", s.ID)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, nd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := replicated(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-on-" + s.Name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: s.Name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, nd := range nodes.Items {
		if !live[nd.Name] {
			_ = kube.CoreV1().Nodes().Delete(ctx, nd.Name, metav1.DeleteOptions{})
			_ = kube.CoreV1().Pods("default").Delete(ctx, "app-on-"+nd.Name, metav1.DeleteOptions{})
		}
	}
}
