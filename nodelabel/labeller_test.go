package nodelabel_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/nodelabel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a fake Hetzner project with a Cluster of pool gpu (cluster
// prod) and servers of every kind a node can belong to.
type world struct {
	api     *hcloudtest.Server
	clock   *hcloudtest.ManualClock
	cluster *hcloudscale.Cluster
	ids     map[string]int64 // server name -> ID
}

const listTTL = time.Minute

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{api: hcloudtest.NewServer(), clock: hcloudtest.NewManualClock(epoch), ids: map[string]int64{}}
	t.Cleanup(w.api.Close)
	w.addServer(t, "gpu-1", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	w.addServer(t, "cpu-1", map[string]string{config.LabelNodeGroup: "cpu", config.LabelCluster: "prod"})
	w.addServer(t, "gpu-staging", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "staging"})
	w.addServer(t, "control-plane", nil)
	w.cluster = w.newCluster(t, map[string]any{
		"cloudInit": "#cloud-config\n",
		"labels":    map[string]string{"node-role.kubernetes.io/gpu": "", "workload": "gpu"},
		"taints":    []map[string]string{{"key": "gpu", "value": "true", "effect": "NoSchedule"}},
	})
	return w
}

// newCluster is a Cluster of the world's project whose pool gpu has the
// given node config, as after a change of the cluster config.
func (w *world) newCluster(t *testing.T, gpu map[string]any) *hcloudscale.Cluster {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"clusterName": "prod",
		"nodeConfigs": map[string]any{
			"gpu": gpu,
			"cpu": map[string]any{"cloudInit": "#cloud-config\n"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.MapEnv(map[string]string{
		"HCLOUD_TOKEN":          w.api.Token(),
		"HCLOUD_ENDPOINT":       w.api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc),
	}, nil), []string{"0:5:cpx21:fsn1:gpu", "0:5:cpx21:fsn1:cpu"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hcloudscale.New(t.Context(), cfg, hcloudscale.WithClock(hcloudtest.WallWaits(w.clock)), hcloudscale.WithListTTL(listTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (w *world) addServer(t *testing.T, name string, labels map[string]string) int64 {
	t.Helper()
	id, err := w.api.AddServer(hcloudtest.ServerInfo{Name: name, ServerType: "cpx21", Location: "fsn1",
		Status: hcloud.ServerStatusRunning, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	w.ids[name] = id
	return id
}

func (w *world) providerID(name string) string {
	return "hcloud://" + strconv.FormatInt(w.ids[name], 10)
}

func node(name, providerID string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: taints},
	}
}

const resync = time.Minute

// run starts a labeller with a fake clock and stops it at cleanup,
// failing the test if Run fails. Step the clock by resync for a resync.
func run(t *testing.T, client *fake.Clientset, pools nodelabel.Pools, opts ...nodelabel.Option) *clocktesting.FakeClock {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	clk := clocktesting.NewFakeClock(epoch)
	l := nodelabel.New(client, pools, append([]nodelabel.Option{
		nodelabel.WithLogger(zaptest.NewLogger(t)), nodelabel.WithClock(clk), nodelabel.WithResync(resync),
	}, opts...)...)
	wg.Go(func() {
		if err := l.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return clk
}

// resyncs steps the clock through n resyncs of the given period, giving
// the labeller time to act on each.
func resyncs(clk *clocktesting.FakeClock, n int, period time.Duration) {
	for range n {
		clk.Step(period)
		time.Sleep(20 * time.Millisecond)
	}
}

func getNode(t *testing.T, client *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newClient is a fake API server with the nodes, which refuses an update
// of a node whose resourceVersion is not the node's current one, as the
// real one does: the labeller relies on that when its informer's copy of
// a node is stale.
func newClient(nodes ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(nodes...)
	gvr := corev1.SchemeGroupVersion.WithResource("nodes")
	var mu sync.Mutex // guards the read-compare-write below
	c.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		n := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node).DeepCopy()
		cur, err := c.Tracker().Get(gvr, "", n.Name)
		if err != nil {
			return false, nil, nil
		}
		if rv := cur.(*corev1.Node).ResourceVersion; n.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), n.Name,
				fmt.Errorf("resourceVersion %q is not the current %q", n.ResourceVersion, rv))
		}
		v, _ := strconv.Atoi(n.ResourceVersion)
		n.ResourceVersion = strconv.Itoa(v + 1)
		if err := c.Tracker().Update(gvr, n, ""); err != nil {
			return true, nil, err
		}
		okUpdates.add(c, n.Name)
		return true, n, nil
	})
	return c
}

// okUpdates counts the node updates each fake client accepted.
var okUpdates = updateCounts{m: map[*fake.Clientset]map[string]int{}}

type updateCounts struct {
	mu sync.Mutex // guards m
	m  map[*fake.Clientset]map[string]int
}

func (u *updateCounts) add(c *fake.Clientset, name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[c] == nil {
		u.m[c] = map[string]int{}
	}
	u.m[c][name]++
}

// updates counts the node updates the client accepted, by node name.
func updates(client *fake.Clientset) map[string]int {
	okUpdates.mu.Lock()
	defer okUpdates.mu.Unlock()
	out := map[string]int{}
	for k, v := range okUpdates.m[client] {
		out[k] = v
	}
	return out
}

var gpuTaint = corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// TestLabelsNodesOfThePools: the node of pool gpu gets the restricted
// label, the other label and the taint it lacks and keeps its own; nodes
// of another pool of the cluster without labels, of another cluster, of
// another provider and of a control-plane server are never changed, over
// many resyncs; nor is a node of a pool without labels and taints.
func TestLabelsNodesOfThePools(t *testing.T) {
	w := newWorld(t)
	others := []*corev1.Node{
		node("cpu-1", w.providerID("cpu-1"), map[string]string{"own": "x"}),
		node("gpu-staging", w.providerID("gpu-staging"), nil),
		node("control-plane", w.providerID("control-plane"), nil),
		node("aws-node", "aws:///eu-west-1a/i-0123", nil),
		node("gpu-1-robot", "hrobot://123", nil),
	}
	objs := []runtime.Object{node("gpu-1", w.providerID("gpu-1"), map[string]string{"workload": "mine", "kubernetes.io/hostname": "gpu-1"})}
	for _, n := range others {
		objs = append(objs, n)
	}
	client := newClient(objs...)
	clk := run(t, client, w.cluster)

	eventually(t, "gpu-1 labelled", func() bool { return getNode(t, client, "gpu-1").Annotations[nodelabel.Annotation] == "gpu" })
	got := getNode(t, client, "gpu-1")
	wantLabels := map[string]string{"workload": "mine", "kubernetes.io/hostname": "gpu-1", "node-role.kubernetes.io/gpu": ""}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("gpu-1 labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{gpuTaint}, got.Spec.Taints); diff != "" {
		t.Errorf("gpu-1 taints (-want +got):\n%s", diff)
	}
	resyncs(clk, 5, resync)
	if diff := cmp.Diff(map[string]int{"gpu-1": 1}, updates(client)); diff != "" {
		t.Errorf("node updates (-want +got):\n%s", diff)
	}
	for _, want := range others {
		if got := getNode(t, client, want.Name); !cmp.Equal(want, got) {
			t.Errorf("node %s changed: %s", want.Name, cmp.Diff(want, got))
		}
	}
}

// TestLabelsNodeWithinOneResync: a node that registers before the
// Cluster's listing shows its server is labelled at the first resync
// after the listing does; a node registering later at once; a node without
// a provider ID yet by its name.
func TestLabelsNodeWithinOneResync(t *testing.T) {
	w := newWorld(t)
	client := newClient(node("gpu-1", w.providerID("gpu-1"), nil))
	clk := run(t, client, w.cluster)
	eventually(t, "gpu-1 labelled", func() bool { return getNode(t, client, "gpu-1").Annotations[nodelabel.Annotation] == "gpu" })

	w.addServer(t, "gpu-2", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node("gpu-2", w.providerID("gpu-2"), nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resyncs(clk, 2, resync)
	if n := updates(client)["gpu-2"]; n != 0 {
		t.Fatalf("gpu-2 updated %d times before its server is listed; want 0", n)
	}
	w.clock.Advance(2 * listTTL)
	if err := w.cluster.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(resync)
	eventually(t, "gpu-2 labelled after one resync", func() bool { return getNode(t, client, "gpu-2").Annotations[nodelabel.Annotation] == "gpu" })

	// A new node without a provider ID, as before the cloud controller
	// manager has initialised it, is found by its name at once.
	w.addServer(t, "gpu-3", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	w.clock.Advance(2 * listTTL)
	if err := w.cluster.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node("gpu-3", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gpu-3 labelled", func() bool { return getNode(t, client, "gpu-3").Annotations[nodelabel.Annotation] == "gpu" })
	if got := getNode(t, client, "gpu-3"); !cmp.Equal(got.Spec.Taints, []corev1.Taint{gpuTaint}) {
		t.Errorf("gpu-3 taints = %v; want the pool's", got.Spec.Taints)
	}
}

// TestLabelRemovedByHandStaysRemoved: the labeller handles a node once;
// what a person removes afterwards is not added again, until the
// annotation is removed too.
func TestLabelRemovedByHandStaysRemoved(t *testing.T) {
	w := newWorld(t)
	client := newClient(node("gpu-1", w.providerID("gpu-1"), nil))
	clk := run(t, client, w.cluster)
	eventually(t, "gpu-1 labelled", func() bool { return getNode(t, client, "gpu-1").Annotations[nodelabel.Annotation] == "gpu" })

	n := getNode(t, client, "gpu-1")
	delete(n.Labels, "node-role.kubernetes.io/gpu")
	n.Spec.Taints = nil
	if _, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	resyncs(clk, 3, resync)
	got := getNode(t, client, "gpu-1")
	if _, ok := got.Labels["node-role.kubernetes.io/gpu"]; ok || len(got.Spec.Taints) != 0 {
		t.Errorf("gpu-1 = labels %v, taints %v; want the removed label and taint to stay removed", got.Labels, got.Spec.Taints)
	}

	n = getNode(t, client, "gpu-1")
	delete(n.Annotations, nodelabel.Annotation)
	if _, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gpu-1 labelled again", func() bool {
		got := getNode(t, client, "gpu-1")
		_, ok := got.Labels["node-role.kubernetes.io/gpu"]
		return ok && len(got.Spec.Taints) == 1
	})
}

// TestRetriesWithBackoff: failed updates are retried only when the
// backoff has passed on the labeller's clock, however many resyncs and
// node updates happen meanwhile, and the labelling succeeds in the end.
func TestRetriesWithBackoff(t *testing.T) {
	w := newWorld(t)
	client := newClient(node("gpu-1", w.providerID("gpu-1"), nil))
	var attempts, failures atomic.Int32
	failures.Store(2)
	client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u := a.(k8stesting.UpdateAction); u.GetObject().(*corev1.Node).Annotations[nodelabel.Annotation] == "" {
			return false, nil, nil // not the labeller's
		}
		attempts.Add(1)
		if failures.Add(-1) >= 0 {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	// Resyncs every 100ms of the fake clock: every step below is many.
	clk := run(t, client, w.cluster, nodelabel.WithResync(100*time.Millisecond), nodelabel.WithBackoff(time.Second, time.Minute))

	waitAttempts := func(want int32) {
		t.Helper()
		// Small steps while waiting: see the end of the test.
		eventually(t, "attempt "+strconv.Itoa(int(want)), func() bool {
			if attempts.Load() >= want {
				return true
			}
			clk.Step(10 * time.Millisecond)
			return false
		})
		resyncs(clk, 3, 100*time.Millisecond) // 300ms: within the next backoff
		if got := attempts.Load(); got != want {
			t.Fatalf("%d update attempts; want %d: the backoff was not kept", got, want)
		}
	}
	waitAttempts(1)
	// A status update of the node, as a kubelet makes.
	n := getNode(t, client, "gpu-1")
	n.Status.Phase = corev1.NodeRunning
	if _, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(699 * time.Millisecond) // with the 300ms above, 1ms short of the first backoff
	time.Sleep(50 * time.Millisecond)
	if got := attempts.Load(); got != 1 {
		t.Fatalf("%d attempts before the first backoff (1s) passed; want 1", got)
	}
	clk.Step(time.Millisecond)
	waitAttempts(2)
	clk.Step(1699 * time.Millisecond) // with the 300ms above, 1ms short of the second backoff (2s)
	time.Sleep(50 * time.Millisecond)
	if got := attempts.Load(); got != 2 {
		t.Fatalf("%d attempts before the second backoff (2s) passed; want 2", got)
	}
	clk.Step(time.Millisecond)
	// The clock goes on in small steps: a failure is counted by the API
	// before the labeller has queued its retry, so the retry may be due a
	// little later than the steps above; never earlier, as checked.
	eventually(t, "gpu-1 labelled", func() bool {
		if getNode(t, client, "gpu-1").Annotations[nodelabel.Annotation] == "gpu" {
			return true
		}
		clk.Step(10 * time.Millisecond)
		return false
	})
	if got := attempts.Load(); got != 3 {
		t.Errorf("%d update attempts; want 3", got)
	}
}

// TestConfigChangeReachesLabelledNodes: one rule for a changed pool
// config, whatever the pool had before: the labels and taints added to
// the pool reach nodes labelled already; what the labeller handled before
// and someone removed stays removed; a taint the node has with the same
// key and effect but another value is the node's, kept and logged, as a
// label with another value is. A node handled by a version that recorded
// nothing counts as handled for what it carries.
func TestConfigChangeReachesLabelledNodes(t *testing.T) {
	w := newWorld(t)
	w.addServer(t, "gpu-2", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	changed := w.newCluster(t, map[string]any{
		"cloudInit": "#cloud-config\n",
		"labels":    map[string]string{"node-role.kubernetes.io/gpu": "", "workload": "gpu", "team": "ml"},
		"taints":    []map[string]string{{"key": "gpu", "value": "false", "effect": "NoSchedule"}},
	})
	// Labelled when the pool had only the label workload, which someone
	// removed since; the kubelet registered the node with gpu=true.
	gpu1 := node("gpu-1", w.providerID("gpu-1"), map[string]string{"own": "x"}, gpuTaint)
	gpu1.Annotations = map[string]string{nodelabel.Annotation: "gpu", nodelabel.AppliedAnnotation: `{"labels":["workload"],"taints":[]}`}
	// Labelled by a version that recorded nothing, with workload only.
	gpu2 := node("gpu-2", w.providerID("gpu-2"), map[string]string{"workload": "gpu"})
	gpu2.Annotations = map[string]string{nodelabel.Annotation: "gpu"}
	client := newClient(gpu1, gpu2)
	core, logs := observer.New(zap.InfoLevel)
	clk := run(t, client, changed, nodelabel.WithLogger(zap.New(core)))

	eventually(t, "both nodes labelled", func() bool { return updates(client)["gpu-1"] == 1 && updates(client)["gpu-2"] == 1 })
	got := getNode(t, client, "gpu-1")
	if diff := cmp.Diff(map[string]string{"own": "x", "node-role.kubernetes.io/gpu": "", "team": "ml"}, got.Labels); diff != "" {
		t.Errorf("gpu-1 labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{gpuTaint}, got.Spec.Taints); diff != "" {
		t.Errorf("gpu-1 taints (-want +got):\n%s", diff)
	}
	wantRecord := `{"labels":["node-role.kubernetes.io/gpu","team","workload"],"taints":["gpu:NoSchedule"]}`
	if rec := got.Annotations[nodelabel.AppliedAnnotation]; rec != wantRecord {
		t.Errorf("gpu-1 %s = %s; want %s", nodelabel.AppliedAnnotation, rec, wantRecord)
	}
	got = getNode(t, client, "gpu-2")
	wantTaint := corev1.Taint{Key: "gpu", Value: "false", Effect: corev1.TaintEffectNoSchedule}
	if diff := cmp.Diff(map[string]string{"workload": "gpu", "node-role.kubernetes.io/gpu": "", "team": "ml"}, got.Labels); diff != "" {
		t.Errorf("gpu-2 labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{wantTaint}, got.Spec.Taints); diff != "" {
		t.Errorf("gpu-2 taints (-want +got):\n%s", diff)
	}
	var kept []any
	for _, e := range logs.FilterMessage("node labelled").FilterField(zap.String("node", "gpu-1")).All() {
		kept = append(kept, e.ContextMap()["kept_taints"])
	}
	if diff := cmp.Diff([]any{[]any{"gpu=true:NoSchedule"}}, kept); diff != "" {
		t.Errorf("gpu-1's kept taints logged (-want +got):\n%s", diff)
	}

	// Handled: resyncs change nothing more.
	resyncs(clk, 3, resync)
	if diff := cmp.Diff(map[string]int{"gpu-1": 1, "gpu-2": 1}, updates(client)); diff != "" {
		t.Errorf("node updates (-want +got):\n%s", diff)
	}
}

// TestNoExecuteOnlyBeforeANodeRuns: pool gpu asks for a NoExecute taint.
// A node that registered and is not Ready yet (no workload can have landed)
// gets it at its first labelling. A node that is Ready when first labelled,
// and one labelled before (its pods may run), get the pool's labels and
// other taints but not the NoExecute one, which would evict their pods at
// once; it is recorded as handled, so resyncs do not come back to it, and
// a warning names it.
func TestNoExecuteOnlyBeforeANodeRuns(t *testing.T) {
	w := newWorld(t)
	w.addServer(t, "gpu-2", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	w.addServer(t, "gpu-3", map[string]string{config.LabelNodeGroup: "gpu", config.LabelCluster: "prod"})
	c := w.newCluster(t, map[string]any{
		"cloudInit": "#cloud-config\n",
		"labels":    map[string]string{"workload": "gpu"},
		"taints": []map[string]string{
			{"key": "gpu", "value": "true", "effect": "NoSchedule"},
			{"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
		},
	})
	readyNode := func(n *corev1.Node, status corev1.ConditionStatus) *corev1.Node {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		return n
	}
	// Registered a moment ago: the kubelet reports it not ready yet.
	fresh := readyNode(node("gpu-1", w.providerID("gpu-1"), nil), corev1.ConditionFalse)
	// Ready, never labelled (the labeller was off, or its server was not
	// listed yet): pods may run on it.
	running := readyNode(node("gpu-2", w.providerID("gpu-2"), nil), corev1.ConditionTrue)
	// Labelled when the pool had no NoExecute taint; not ready now (its
	// kubelet restarts), but its pods are there.
	labelled := readyNode(node("gpu-3", w.providerID("gpu-3"), map[string]string{"workload": "gpu"}, gpuTaint), corev1.ConditionUnknown)
	labelled.Annotations = map[string]string{nodelabel.Annotation: "gpu", nodelabel.AppliedAnnotation: `{"labels":["workload"],"taints":["gpu:NoSchedule"]}`}
	client := newClient(fresh, running, labelled)
	core, logs := observer.New(zap.InfoLevel)
	clk := run(t, client, c, nodelabel.WithLogger(zap.New(core)))

	eventually(t, "the nodes labelled", func() bool {
		u := updates(client)
		return u["gpu-1"] == 1 && u["gpu-2"] == 1 && u["gpu-3"] == 1
	})
	noExecute := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}
	wantTaints := map[string][]corev1.Taint{
		"gpu-1": {gpuTaint, noExecute},
		"gpu-2": {gpuTaint},
		"gpu-3": {gpuTaint},
	}
	wantRecord := `{"labels":["workload"],"taints":["dedicated:NoExecute","gpu:NoSchedule"]}`
	for name, want := range wantTaints {
		got := getNode(t, client, name)
		if diff := cmp.Diff(want, got.Spec.Taints); diff != "" {
			t.Errorf("%s taints (-want +got):\n%s", name, diff)
		}
		if got.Labels["workload"] != "gpu" {
			t.Errorf("%s labels = %v; want workload=gpu", name, got.Labels)
		}
		if rec := got.Annotations[nodelabel.AppliedAnnotation]; rec != wantRecord {
			t.Errorf("%s %s = %s; want %s", name, nodelabel.AppliedAnnotation, rec, wantRecord)
		}
	}
	var warned []string
	for _, e := range logs.FilterLevelExact(zap.WarnLevel).All() {
		warned = append(warned, e.ContextMap()["node"].(string))
	}
	if diff := cmp.Diff([]string{"gpu-2", "gpu-3"}, warned, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("nodes warned about (-want +got):\n%s", diff)
	}

	// Handled: resyncs add nothing, not even once gpu-3 is Ready again.
	n := getNode(t, client, "gpu-3")
	readyNode(n, corev1.ConditionTrue)
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := updates(client) // with the status update above
	resyncs(clk, 3, resync)
	if diff := cmp.Diff(before, updates(client)); diff != "" {
		t.Errorf("node updates (-want +got):\n%s", diff)
	}
	if got := getNode(t, client, "gpu-3").Spec.Taints; !cmp.Equal([]corev1.Taint{gpuTaint}, got) {
		t.Errorf("gpu-3 taints once Ready = %v; want only %v", got, gpuTaint)
	}
}
