package lifecycle_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
	"github.com/hcloudscale/hcloudscale/pool"
)

// env is one cluster: the fake Hetzner API, a Cluster on it, a fake
// Kubernetes API whose "kubelet" registers a Ready node for every running
// server, and a Controller.
type env struct {
	t       *testing.T
	api     *hcloudtest.Server
	cluster *hcloudscale.Cluster
	kube    *fake.Clientset
	ctrl    *lifecycle.Controller
	clk     *clocktesting.FakeClock

	mu       sync.Mutex
	joins    bool            // the kubelet registers new servers
	evicted  []string        // pods evicted, in order
	refuse   map[string]bool // pods whose eviction the "budget" refuses
	readyAt  map[string]time.Time
	nodeSeen map[string]bool
}

func clusterConfig(cloudInit string, replace map[string]any, top map[string]any) config.Env {
	cc := map[string]any{
		"clusterName":   "prod",
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers": map[string]any{"cloudInit": cloudInit, "replace": replace},
		},
	}
	if top != nil {
		cc["replace"] = top
	}
	doc, _ := json.Marshal(cc)
	return config.MapEnv(map[string]string{"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}, nil)
}

func load(t *testing.T, api *hcloudtest.Server, e config.Env, nodes string) *config.Config {
	t.Helper()
	vars := map[string]string{"HCLOUD_TOKEN": api.Token(), "HCLOUD_ENDPOINT": api.URL()}
	for _, k := range []string{"HCLOUD_CLUSTER_CONFIG"} {
		v, _ := e.Lookup(k)
		vars[k] = v
	}
	cfg, err := config.Load(config.MapEnv(vars, nil), []string{nodes})
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return cfg
}

var replaceImageAndCloudInit = map[string]any{"drift": []string{"user_data", "image"}, "joinTimeout": "2m", "drainTimeout": "1m"}

func newEnv(t *testing.T, servers int, replace map[string]any) *env {
	t.Helper()
	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	t.Cleanup(api.Close)
	return newEnvOf(t, api, load(t, api, clusterConfig("#cloud-config\n", replace, nil), "1:5:cx23:fsn1:workers"), "workers", servers)
}

// newEnvOf is newEnv for the configuration cfg on api, with servers
// servers in the node group named group.
func newEnvOf(t *testing.T, api *hcloudtest.Server, cfg *config.Config, group string, servers int, opts ...hcloudscale.Option) *env {
	t.Helper()
	c, err := hcloudscale.New(context.Background(), cfg, append([]hcloudscale.Option{hcloudscale.WithListTTL(time.Millisecond), hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	e := &env{t: t, api: api, cluster: c, kube: fake.NewClientset(), joins: true, refuse: map[string]bool{}, nodeSeen: map[string]bool{}}
	e.kube.PrependReactor("create", "pods", e.evict)
	if servers > 0 {
		if err := c.Pool(group).IncreaseSize(context.Background(), servers); err != nil {
			t.Fatal(err)
		}
		// Running in the API and done in the pool: a server whose create
		// the pool still follows is no drift candidate yet.
		e.settle(func() bool {
			ins := c.Pool(group).Instances()
			return len(e.running()) == servers && len(ins) == servers &&
				!slices.ContainsFunc(ins, func(in pool.Instance) bool { return in.State != pool.Running })
		})
		e.kubelet()
	}
	e.clk = clocktesting.NewFakeClock(time.Now())
	e.ctrl, err = lifecycle.New(c, e.kube, lifecycle.WithClock(e.clk), lifecycle.WithDrainOptions(drainOpts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.ctrl.Close)
	return e
}

// evict plays the Eviction API: the pod goes, unless its "budget"
// refuses (429).
func (e *env) evict(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	e.mu.Lock()
	refused := e.refuse[ev.Name]
	if !refused {
		e.evicted = append(e.evicted, ev.Name)
	}
	e.mu.Unlock()
	if refused {
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
	}
	err := e.kube.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
	return true, nil, err
}

func (e *env) running() []hcloudtest.ServerInfo {
	all, err := e.api.Servers("")
	if err != nil {
		e.t.Fatal(err)
	}
	var out []hcloudtest.ServerInfo
	for _, s := range all {
		if s.Status == hcloud.ServerStatusRunning {
			out = append(out, s)
		}
	}
	return out
}

func (e *env) settle(done func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatal("timed out")
		}
		_ = e.cluster.Refresh(context.Background())
		time.Sleep(2 * time.Millisecond)
	}
}

// kubelet registers a Ready node, with one pod, for each running server
// without one (while joins), and removes the nodes of deleted servers.
func (e *env) kubelet() {
	ctx := context.Background()
	live := map[string]bool{}
	for _, s := range e.running() {
		live[s.Name] = true
		e.mu.Lock()
		seen, joins := e.nodeSeen[s.Name], e.joins
		e.mu.Unlock()
		if seen || !joins {
			continue
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", s.ID)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		pod := replicated(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-on-" + s.Name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: s.Name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		if _, err := e.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.mu.Lock()
		e.nodeSeen[s.Name] = true
		e.mu.Unlock()
	}
	nodes, _ := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		if !live[n.Name] {
			_ = e.kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
}

// replicated makes p a ReplicaSet's pod.
func replicated(p *corev1.Pod) *corev1.Pod {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app", UID: "rs-app", Controller: &yes}}
	return p
}

func (e *env) reconfigure(cloudInit string, replace map[string]any, top map[string]any) {
	e.t.Helper()
	if err := e.cluster.Reconfigure(context.Background(), load(e.t, e.api, clusterConfig(cloudInit, replace, top), "1:5:cx23:fsn1:workers")); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) node(name string) *corev1.Node {
	n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

// run steps the controller (and the kubelet) until done or the steps run
// out, checking the invariants after every step: no pod of a node is
// evicted before a replacement of that node is Ready, and the pool never
// has more servers than it started with plus maxSurge.
func (e *env) run(steps, start, surge int, done func() bool) {
	e.t.Helper()
	for range steps {
		if done() {
			return
		}
		if _, err := e.ctrl.Step(context.Background()); err != nil {
			e.t.Fatalf("Step: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
		_ = e.cluster.Refresh(context.Background())
		e.kubelet()
		if n := len(e.all()); n > start+surge {
			e.t.Fatalf("%d servers; the pool started with %d and may surge by %d", n, start, surge)
		}
	}
	if !done() {
		e.t.Fatalf("not done after %d steps", steps)
	}
}

func (e *env) all() []hcloudtest.ServerInfo {
	all, _ := e.api.Servers("")
	return all
}

func TestDriftRollsEveryNodeOneAtATime(t *testing.T) {
	e := newEnv(t, 3, replaceImageAndCloudInit)
	old := map[string]bool{}
	for _, s := range e.running() {
		old[s.Name] = true
	}
	reg := prometheus.NewRegistry()
	e.ctrl.Close()
	var err error
	e.ctrl, err = lifecycle.New(e.cluster, e.kube, lifecycle.WithRegisterer(reg), lifecycle.WithClock(e.clk),
		lifecycle.WithDrainOptions(drainOpts))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := e.ctrl.Step(context.Background()); err != nil || len(p.Steps) != 0 {
		t.Fatalf("before any change: %+v, %v", p, err)
	}
	e.reconfigure("#cloud-config\npackages: [htop]\n", replaceImageAndCloudInit, nil)
	e.run(400, 3, 1, func() bool {
		for _, s := range e.all() {
			if old[s.Name] {
				return false
			}
		}
		return len(e.running()) == 3 && !e.protected()
	})
	e.mu.Lock()
	evicted := append([]string(nil), e.evicted...)
	e.mu.Unlock()
	if len(evicted) != 3 {
		t.Errorf("evicted %v; want the 3 pods of the old nodes, once each", evicted)
	}
	for name := range old {
		if e.node(name) != nil {
			t.Errorf("old node %s still there", name)
		}
	}
	for _, s := range e.running() {
		n := e.node(s.Name)
		if n == nil {
			t.Fatalf("no node for %s", s.Name)
		}
		if _, ok := n.Annotations[lifecycle.ScaleDownDisabledAnnotation]; ok {
			t.Errorf("%s keeps the scale-down protection after its old node went", s.Name)
		}
	}
	if p := e.cluster.Pool("workers"); p.TargetSize() != 3 {
		t.Errorf("target %d; want 3 as before", p.TargetSize())
	}
	want := `
# HELP hcloudscale_replacements_total Replacements by pool and result: started; done (old server deleted); failed (the replacement did not join or was not created); stopped (the drain did not finish, or the replacement went away).
# TYPE hcloudscale_replacements_total counter
hcloudscale_replacements_total{pool="workers",result="done"} 3
hcloudscale_replacements_total{pool="workers",result="failed"} 0
hcloudscale_replacements_total{pool="workers",result="started"} 3
hcloudscale_replacements_total{pool="workers",result="stopped"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hcloudscale_replacements_total"); err != nil {
		t.Error(err)
	}
}

func TestReplacementThatNeverJoinsStopsThePool(t *testing.T) {
	e := newEnv(t, 2, map[string]any{"drift": []string{"user_data"}, "joinTimeout": "10m"})
	e.reconfigure("#cloud-config\n# v2\n", map[string]any{"drift": []string{"user_data"}, "joinTimeout": "10m"}, nil)
	e.mu.Lock()
	e.joins = false
	e.mu.Unlock()
	before := e.running()
	if _, err := e.ctrl.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.settle(func() bool { return len(e.running()) == 3 })
	// The replacement is older than the join timeout.
	e.clk.Step(11 * time.Minute)
	e.run(100, 2, 1, func() bool { return len(e.all()) == 2 })
	for _, s := range before {
		n := e.node(s.Name)
		if n.Spec.Unschedulable {
			t.Errorf("old node %s cordoned", s.Name)
		}
	}
	stopped := 0
	for _, s := range before {
		if v := e.node(s.Name).Annotations[lifecycle.StoppedAnnotation]; strings.Contains(v, "did not become Ready") {
			stopped++
		}
	}
	if stopped != 1 {
		t.Errorf("%d nodes carry the stop; want 1", stopped)
	}
	// The pool's rollout stays stopped: nothing new starts.
	for range 5 {
		p, err := e.ctrl.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if p.Count(lifecycle.StateStart) != 0 {
			t.Fatalf("a replacement started after the stop: %+v", p.Steps)
		}
	}
	if len(e.all()) != 2 {
		t.Errorf("%d servers; want the 2 old ones", len(e.all()))
	}
}

func containsName(ss []hcloudtest.ServerInfo, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

func TestDrainBlockedUncordonsAndKeepsTheOldServer(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1s"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.mu.Lock()
	e.refuse["app-on-"+old.Name] = true
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(300, 1, 1, func() bool {
		n := e.node(old.Name)
		return n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], "drain did not finish")
	})
	n := e.node(old.Name)
	if n.Spec.Unschedulable {
		t.Error("the old node stays cordoned after the drain stopped")
	}
	if _, ok := e.api.ServerByID(old.ID); !ok {
		t.Error("the old server was deleted although its drain did not finish")
	}
	if _, ok := n.Annotations[lifecycle.ReplacementAnnotation]; ok {
		t.Error("the old node keeps its replacement mark")
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t, 2, replaceImageAndCloudInit)
	e.reconfigure("#cloud-config\n# v2\n", replaceImageAndCloudInit, nil)
	dry, err := lifecycle.New(e.cluster, e.kube, lifecycle.WithDryRun(true))
	if err != nil {
		t.Fatal(err)
	}
	defer dry.Close()
	e.api.ResetCounts()
	for range 3 {
		p, err := dry.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if p.Count(lifecycle.StateStart) != 1 || p.Count(lifecycle.StateBlocked) != 1 {
			t.Fatalf("plan: %+v", p.Steps)
		}
	}
	for tmpl, n := range e.api.Counts() {
		if !strings.HasPrefix(tmpl, "GET ") && n > 0 {
			t.Errorf("dry run sent %d %s", n, tmpl)
		}
	}
	if len(e.all()) != 2 {
		t.Errorf("%d servers after a dry run", len(e.all()))
	}
	nodes, _ := e.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	for _, n := range nodes.Items {
		if len(n.Annotations) > 0 || n.Spec.Unschedulable {
			t.Errorf("dry run changed node %s: %v", n.Name, n.Annotations)
		}
	}
}

// restart stops the Controller and the Cluster as a process exit would
// (drains cancelled, creates in flight stopped) and starts both anew on
// the same APIs with cfg's cluster config.
func (e *env) restart(e2 config.Env, nodes string) {
	e.t.Helper()
	e.ctrl.Close()
	if err := e.cluster.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	c, err := hcloudscale.New(context.Background(), load(e.t, e.api, e2, nodes), hcloudscale.WithListTTL(time.Millisecond), hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close(context.Background()) })
	e.cluster = c
	e.ctrl, err = lifecycle.New(c, e.kube, lifecycle.WithClock(e.clk), lifecycle.WithDrainOptions(drainOpts))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(e.ctrl.Close)
}

// marked returns the nodes that carry a replacement mark in phase.
func (e *env) marked(phase lifecycle.Phase) []string {
	nodes, _ := e.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	var out []string
	for _, n := range nodes.Items {
		if strings.Contains(n.Annotations[lifecycle.ReplacementAnnotation], `"phase":"`+string(phase)+`"`) {
			out = append(out, n.Name)
		}
	}
	return out
}

// clean checks that no replacement left a trace: no mark, no cordon, no
// protection, and every server has a node.
func (e *env) clean() {
	e.t.Helper()
	nodes, _ := e.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	for _, n := range nodes.Items {
		for _, a := range []string{lifecycle.ReplacementAnnotation, lifecycle.ScaleDownDisabledAnnotation, lifecycle.ProtectsAnnotation} {
			if _, ok := n.Annotations[a]; ok {
				e.t.Errorf("node %s keeps %s: %v", n.Name, a, n.Annotations)
			}
		}
		if n.Spec.Unschedulable {
			e.t.Errorf("node %s left cordoned", n.Name)
		}
	}
	if len(nodes.Items) != len(e.all()) {
		e.t.Errorf("%d nodes for %d servers", len(nodes.Items), len(e.all()))
	}
}

// A restart in the middle of a drain: the new process finds the marked,
// cordoned node and the replacement from the API and finishes the
// rollout, with nothing leaked.
func TestRestartMidDrainFinishesTheRollout(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
	e := newEnv(t, 2, rc)
	old := map[string]bool{}
	for _, s := range e.running() {
		old[s.Name] = true
		e.refuse["app-on-"+s.Name] = true // the drains wait
	}
	v2 := clusterConfig("#cloud-config\n# v2\n", rc, nil)
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 2, 1, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })
	e.restart(v2, "1:5:cx23:fsn1:workers")
	e.mu.Lock()
	e.refuse = map[string]bool{}
	e.mu.Unlock()
	e.run(400, 2, 1, func() bool {
		for _, s := range e.all() {
			if old[s.Name] {
				return false
			}
		}
		return len(e.running()) == 2 && len(e.marked(lifecycle.PhaseDraining)) == 0
	})
	e.run(20, 2, 0, func() bool { return !e.protected() })
	e.clean()
}

func (e *env) protected() bool {
	nodes, _ := e.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	for _, n := range nodes.Items {
		if _, ok := n.Annotations[lifecycle.ProtectsAnnotation]; ok {
			return true
		}
	}
	return false
}

// A restart between the surge and the replacement's node joining: the
// new process finds the replacement by its label and goes on.
func TestRestartWhileSurgingFinishes(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.mu.Lock()
	e.joins = false
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 1, 1, func() bool { return len(e.all()) == 2 })
	e.restart(clusterConfig("#cloud-config\n# v2\n", rc, nil), "1:5:cx23:fsn1:workers")
	e.mu.Lock()
	e.joins = true
	e.mu.Unlock()
	e.run(400, 1, 1, func() bool {
		_, there := e.api.ServerByID(old.ID)
		return !there && len(e.running()) == 1
	})
	e.run(20, 1, 0, func() bool { return !e.protected() })
	e.clean()
}

// The nodes of a pool removed from the configuration are drained out one
// at a time and their servers deleted, through a restart in the middle.
func TestRemovedPoolDrainedOutThroughARestart(t *testing.T) {
	e := newEnv(t, 2, nil)
	top := map[string]any{"removedPools": true}
	removed := func() config.Env {
		doc, _ := json.Marshal(map[string]any{"clusterName": "prod", "imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
			"replace": top, "nodeConfigs": map[string]any{"other": map[string]any{"cloudInit": "#cloud-config\n"}}})
		return config.MapEnv(map[string]string{"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}, nil)
	}
	e.mu.Lock()
	for _, s := range e.running() {
		e.refuse["app-on-"+s.Name] = true
	}
	e.mu.Unlock()
	e.restart(removed(), "0:3:cx23:fsn1:other")
	if p := e.cluster.Pool("workers"); p == nil || !p.Removed() {
		t.Fatalf("workers is not a removed pool: %v", p)
	}
	e.run(200, 2, 0, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })
	e.restart(removed(), "0:3:cx23:fsn1:other")
	e.mu.Lock()
	e.refuse = map[string]bool{}
	e.mu.Unlock()
	e.run(400, 2, 0, func() bool { return len(e.all()) == 0 })
	e.clean()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.evicted) != 2 {
		t.Errorf("evicted %v; want the pod of each node once", e.evicted)
	}
}

// The leader hands over in the middle of a drain: the old leader's
// Controller stops its drain and acts no more; the new leader's, on a
// Cluster of its own, finishes the rollout from what the APIs show.
func TestLeaderHandOverMidReplacement(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
	e := newEnv(t, 2, rc)
	var aLeads atomic.Bool
	aLeads.Store(true)
	a, err := lifecycle.New(e.cluster, e.kube, lifecycle.WithLeader(aLeads.Load), lifecycle.WithClock(e.clk),
		lifecycle.WithDrainOptions(drainOpts))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e.ctrl = a
	old := map[string]bool{}
	for _, s := range e.running() {
		old[s.Name] = true
		e.refuse["app-on-"+s.Name] = true
	}
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 2, 1, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })

	aLeads.Store(false)
	if p, err := a.Step(context.Background()); p != nil || err != nil {
		t.Fatalf("Step of a Controller that no longer leads: %v, %v", p, err)
	}
	e.mu.Lock()
	evictedBefore := len(e.evicted)
	e.refuse = map[string]bool{}
	e.mu.Unlock()
	e.cluster = newClusterOn(t, e.api, clusterConfig("#cloud-config\n# v2\n", rc, nil))
	b, err := lifecycle.New(e.cluster, e.kube, lifecycle.WithClock(e.clk), lifecycle.WithDrainOptions(drainOpts))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e.ctrl = b
	e.run(400, 2, 1, func() bool {
		if p, _ := a.Step(context.Background()); p != nil {
			t.Fatal("the old leader planned")
		}
		for _, s := range e.all() {
			if old[s.Name] {
				return false
			}
		}
		return len(e.running()) == 2
	})
	e.run(20, 2, 0, func() bool { return !e.protected() })
	e.clean()
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.evicted) - evictedBefore; n != 2 {
		t.Errorf("%d evictions after the hand-over; want one per old node", n)
	}
}

func newClusterOn(t *testing.T, api *hcloudtest.Server, e config.Env) *hcloudscale.Cluster {
	t.Helper()
	c, err := hcloudscale.New(context.Background(), load(t, api, e, "1:5:cx23:fsn1:workers"), hcloudscale.WithListTTL(time.Millisecond), hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// A node that has not been Ready for repairAfter is replaced surge-first
// and its server deleted without a drain, which its pods could not
// finish; the other node is left alone.
func TestRepairDeletesANodeThatIsNotReadyWithoutADrain(t *testing.T) {
	e := newEnv(t, 2, map[string]any{"repairAfter": "15m", "joinTimeout": "2m"})
	servers := e.running()
	sick, well := servers[0].Name, servers[1].Name
	n := e.node(sick)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(e.clk.Now().Add(-20 * time.Minute))}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.refuse["app-on-"+sick] = true // a drain would be held for ever
	e.joins = false                 // the replacement's node registers late
	e.mu.Unlock()
	// Surge first: the replacement runs, but until its node is Ready the
	// old server stays.
	e.run(300, 2, 1, func() bool { return len(e.running()) == 3 })
	for range 20 {
		if _, err := e.ctrl.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		_ = e.cluster.Refresh(context.Background())
		e.kubelet()
		if !containsName(e.all(), sick) {
			t.Fatal("the old server was deleted before its replacement's node registered")
		}
	}
	e.mu.Lock()
	e.joins = true
	e.mu.Unlock()
	e.run(300, 2, 1, func() bool { return !containsName(e.all(), sick) && len(e.running()) == 2 && !e.protected() })
	e.mu.Lock()
	evicted := append([]string(nil), e.evicted...)
	e.mu.Unlock()
	if len(evicted) != 0 {
		t.Errorf("evicted %v; a repair drains nothing", evicted)
	}
	if w := e.node(well); w == nil || w.Spec.Unschedulable || !containsName(e.all(), well) {
		t.Errorf("the Ready node %s was touched: %+v", well, w)
	}
	if p := e.cluster.Pool("workers"); p.TargetSize() != 2 {
		t.Errorf("target %d; want 2 as before", p.TargetSize())
	}
}

// drainOpts retry refused evictions every few milliseconds, so that a
// budget lifted is seen at once.
var drainOpts = nodedrain.Options{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Poll: time.Millisecond}

// A replacement that registered and took pods, then was cordoned by a
// person, is not Ready for the lifecycle: at its join timeout the
// replacement stops, but its server is not deleted, which would take its
// pods down without a drain. It stays as an ordinary node, unprotected,
// and the old node's stop names it.
func TestReplacementWithPodsIsKeptAtItsJoinTimeout(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "joinTimeout": "10m"}
	e := newEnv(t, 1, rc)
	old := e.running()[0].Name
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	if _, err := e.ctrl.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.settle(func() bool { return len(e.running()) == 2 })
	e.kubelet() // registers the replacement's node, with a pod
	repl := ""
	for _, s := range e.running() {
		if s.Name != old {
			repl = s.Name
		}
	}
	n := e.node(repl)
	n.Spec.Unschedulable = true // a person cordons it
	if _, err := e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(11 * time.Minute)
	e.run(20, 1, 1, func() bool { return strings.Contains(e.node(old).Annotations[lifecycle.StoppedAnnotation], repl) })
	if _, there := e.api.ServerByID(e.serverID(repl)); !there {
		t.Fatalf("the replacement %s, running a pod, was deleted", repl)
	}
	// The step that stopped it may have protected it too: the next one,
	// finding it ended, lifts that.
	if _, err := e.ctrl.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.protected() {
		t.Errorf("the kept replacement %s keeps its protection", repl)
	}
	if e.node(old).Spec.Unschedulable {
		t.Errorf("the old node %s is cordoned", old)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.evicted) != 0 {
		t.Errorf("evicted %v; want nothing", e.evicted)
	}
}

// Run steps when what a replacement waits for happens, not only every
// interval: with the Controller's clock standing still (its ticker never
// fires), a node is replaced from start to end on the events alone: the
// replacement's node registering Ready, the drain ending, the old
// server's delete ending and its node going.
func TestRunStepsOnEvents(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}}
	e := newEnv(t, 1, rc)
	old := e.running()[0].Name
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.ctrl.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, there := e.api.ServerByID(e.serverID(old))
		if !there && old != "" && len(e.running()) == 1 && !e.protected() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not replaced without a tick: servers %v, protected %v", e.all(), e.protected())
		}
		time.Sleep(5 * time.Millisecond)
		e.kubelet()
	}
}

// TestRunStepsOnAConfigChange: Run has stepped and nothing was due; the
// configuration then changes the pool's cloud-init. With the Controller's
// clock standing still, only the change itself can make Run step: the
// node is replaced without a tick.
func TestRunStepsOnAConfigChange(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}}
	e := newEnv(t, 1, rc)
	old := e.running()[0].Name
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.ctrl.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	for range 20 {
		time.Sleep(5 * time.Millisecond)
		e.kubelet()
	}
	if len(e.all()) != 1 {
		t.Fatalf("a replacement started with nothing due: servers %v", e.all())
	}
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, there := e.api.ServerByID(e.serverID(old))
		if !there && len(e.running()) == 1 && !e.protected() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not replaced after the configuration changed: servers %v, protected %v", e.all(), e.protected())
		}
		time.Sleep(5 * time.Millisecond)
		e.kubelet()
	}
}
