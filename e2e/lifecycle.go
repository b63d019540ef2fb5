package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// Lifecycler is a Provider whose Cluster the node lifecycle can run on,
// in the process that serves the autoscaler (as serve --replace-nodes
// does).
type Lifecycler interface {
	Cluster(p any) *hcloudscale.Cluster
}

// LifecycleScenarios run the node lifecycle beside the autoscaler's loop.
var LifecycleScenarios = []struct {
	Name string
	Run  func(t *testing.T, kind Provider)
}{
	{"DriftRolled", DriftRolled},
	{"ExpireAfter", ExpireAfter},
	{"ReplacementNeverJoins", ReplacementNeverJoins},
	{"DrainBlocked", DrainBlocked},
	{"OutsideWindow", OutsideWindow},
	{"RemovedPoolDrained", RemovedPoolDrained},
	{"LeaderHandOverMidReplacement", LeaderHandOverMidReplacement},
	{"NodeRepaired", NodeRepaired},
	{"OfferingMovedBack", OfferingMovedBack},
}

// rollout watches a lifecycle run: evictions (played as the Eviction API
// and a ReplicaSet do: the pod goes and comes back pending under a new
// name) and what each check sees.
type rollout struct {
	w    *world
	ctrl *lifecycle.Controller
	stop func()

	kind Provider

	mu           sync.Mutex
	evicted      int
	early        []string        // pods evicted while their node had no Ready replacement
	replacements map[string]bool // replacement servers seen, by name
	refuse       map[string]bool // pod name prefixes the "budget" refuses
}

// startLifecycle runs a Controller on the world's provider beside the
// autoscaler's loop.
func (w *world) startLifecycle(kind Provider) *rollout {
	w.t.Helper()
	if _, ok := kind.(Lifecycler); !ok {
		w.t.Skipf("%s does not run the node lifecycle in this suite", kind.Name())
	}
	r := &rollout{w: w, replacements: map[string]bool{}, refuse: map[string]bool{}, kind: kind}
	// The fake client's reactor chain is not safe to change while the
	// kubelet's and the scheduler's steps call it: pause them meanwhile.
	w.background.Lock()
	w.kube.KubeClient.PrependReactor("create", "pods", r.evict)
	w.background.Unlock()
	r.run(func() bool { return true })
	w.t.Cleanup(func() { r.stop() })
	return r
}

// run starts a Controller on the provider's current Cluster that acts
// while leads says so.
func (r *rollout) run(leads func() bool) {
	r.w.t.Helper()
	ctrl, err := lifecycle.New(r.kind.(Lifecycler).Cluster(r.w.provider.current()), r.w.kube.KubeClient,
		lifecycle.WithInterval(500*time.Millisecond), lifecycle.WithLeader(leads),
		lifecycle.WithDrainOptions(nodedrain.Options{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Poll: 100 * time.Millisecond}))
	if err != nil {
		r.w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.w.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ctrl.Run(ctx) }()
	r.ctrl = ctrl
	r.stop = func() { cancel(); <-done; ctrl.Close() }
}

// restart restarts the provider and the lifecycle with it, the hard way,
// as a restart of serve --replace-nodes is.
func (r *rollout) restart() {
	r.w.t.Helper()
	r.stop()
	r.w.restartProvider()
	r.run(func() bool { return true })
}

// evict answers an eviction as the API server and a ReplicaSet would.
func (r *rollout) evict(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	r.mu.Lock()
	defer r.mu.Unlock()
	for prefix := range r.refuse {
		if strings.HasPrefix(ev.Name, prefix) {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		}
	}
	// A reactor runs under the fake clientset's lock: only its tracker
	// may be used here.
	tr := r.w.kube.KubeClient.Tracker()
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	obj, err := tr.Get(podsGVR, ev.Namespace, ev.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if !r.replacementReady(pod.Spec.NodeName) {
		r.early = append(r.early, ev.Name)
	}
	if err := tr.Delete(podsGVR, ev.Namespace, ev.Name); err != nil {
		return true, nil, err
	}
	r.evicted++
	again := Pod(fmt.Sprintf("%s-r%d", ev.Name, r.evicted), pod.Spec.Containers[0].Resources.Requests.Cpu().String(), pod.Spec.Containers[0].Resources.Requests.Memory().String())
	again.Spec.NodeSelector, again.Spec.Tolerations = pod.Spec.NodeSelector, pod.Spec.Tolerations
	if err := tr.Create(podsGVR, again, ev.Namespace); err != nil {
		return true, nil, err
	}
	klog.Infof("e2e: evicted %s from %s, recreated as %s", ev.Name, pod.Spec.NodeName, again.Name)
	return true, nil, nil
}

// replacementJoined reports whether a server replacing the server of ID
// old has a Ready, schedulable node.
func (r *rollout) replacementJoined(old int64) bool {
	all, _ := r.w.fake.Servers("")
	for _, s := range all {
		if s.Labels[config.LabelReplaces] != strconv.FormatInt(old, 10) {
			continue
		}
		obj, err := r.w.kube.KubeClient.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", s.Name)
		if n, ok := obj.(*corev1.Node); err == nil && ok && ready(n) && !n.Spec.Unschedulable {
			return true
		}
	}
	return false
}

// replacementReady reports whether a server replacing node's server has a
// Ready node.
func (r *rollout) replacementReady(node string) bool {
	all, _ := r.w.fake.Servers("")
	for _, s := range all {
		if s.Name == node {
			return r.replacementJoined(s.ID)
		}
	}
	return false
}

// check is a loop's invariant of a rollout: the pool never has more than
// limit servers, nothing is evicted before its node's replacement is
// Ready, no replacement server disappears (the autoscaler never removes
// one), and no more pods wait than one node's worth, which the surge
// covers.
func (r *rollout) check(pool string, limit, pending int) func() {
	return func() {
		r.w.t.Helper()
		r.w.atMost(pool, limit)
		// Read the fake clientset before taking r.mu: the eviction
		// reactor takes r.mu under the clientset's lock.
		servers, waiting := r.w.servers(pool), r.w.pending()
		r.mu.Lock()
		early := slices.Clone(r.early)
		live := map[string]bool{}
		for _, s := range servers {
			live[s.Name] = true
			if s.Labels[config.LabelReplaces] != "" {
				r.replacements[s.Name] = true
			}
		}
		var gone []string
		for name := range r.replacements {
			if !live[name] {
				gone = append(gone, name)
			}
		}
		r.mu.Unlock()
		if len(early) > 0 {
			r.w.t.Fatalf("pods evicted before their node's replacement was Ready: %v\n%s", early, r.w.describe())
		}
		if len(gone) > 0 {
			r.w.t.Fatalf("replacements %v were removed\n%s", gone, r.w.describe())
		}
		if waiting > pending {
			r.w.t.Fatalf("%d pods pending, more than the %d the surge covers\n%s", waiting, pending, r.w.describe())
		}
	}
}

// replaced reports whether every server of pool is a replacement.
func (w *world) replaced(pool string, n int) bool {
	ss := w.servers(pool)
	if len(ss) != n {
		return false
	}
	for _, s := range ss {
		if s.Labels[config.LabelReplaces] == "" {
			return false
		}
	}
	return true
}

// rollingPool is the pool of the lifecycle scenarios: at its max with
// one pod per node. The scenarios' pods have no owner reference (the
// world plays their ReplicaSet, recreating each evicted pod), so the pool
// accepts evicting pods without a controller.
func rollingPool(replace map[string]any) poolSpec {
	replace["evictUnreplicatedPods"] = true
	return poolSpec{name: "workers", serverType: "cx23", location: "fsn1", max: 3, replace: replace}
}

// DriftRolled: a cloud-init change rolls every node of the pool, one at a
// time, the replacement Ready before anything is evicted; the autoscaler
// never removes a replacement, the pool ends where it started, and no
// more pods wait than the surge covers.
func DriftRolled(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"drift": []string{"user_data"}, "joinTimeout": "1m", "drainTimeout": "1m"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 3)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 3 }, nil)
	r := w.startLifecycle(kind)
	p.cloudInit = "#cloud-config\n# v2\n"
	w.setPools(p)
	w.loopUntil("every node replaced", 180*time.Second, func() bool {
		return w.replaced("workers", 3) && w.boundOn("web-", "workers") == 3 && w.pending() == 0
	}, r.check("workers", 4, 1))
	w.loopFor(unneededTime+3*time.Second, r.check("workers", 3, 0))
	w.noLeak()
	w.record("drift-rolled")
}

// ExpireAfter: servers older than expireAfter are replaced as drift is.
func ExpireAfter(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"expireAfter": "24h", "expireJitter": "1h", "joinTimeout": "1m", "drainTimeout": "1m"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"), withAgedServers("workers", 2, 48*time.Hour))
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 }, nil)
	r := w.startLifecycle(kind)
	w.loopUntil("every aged node replaced", 180*time.Second, func() bool {
		return w.replaced("workers", 2) && len(w.nodes()) == 2 && w.boundOn("web-", "workers") == 2 && w.pending() == 0
	}, r.check("workers", 3, 1))
	w.noLeak()
	w.record("expire-after")
}

// ReplacementNeverJoins: the replacement's node never registers; after
// the join timeout the replacement is deleted, the old node untouched,
// and the pool starts nothing new.
func ReplacementNeverJoins(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"drift": []string{"user_data"}, "joinTimeout": "5s", "drainTimeout": "1m"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 }, nil)
	before := w.servers("workers")
	w.kubelet.Withhold("workers", 10)
	r := w.startLifecycle(kind)
	p.cloudInit = "#cloud-config\n# v2\n"
	w.setPools(p)
	w.loopUntil("the replacement given up", 60*time.Second, func() bool { return w.stopped("did not become Ready") == 1 }, func() { w.atMost("workers", 3) })
	w.loopUntil("the failed replacement deleted", 60*time.Second, func() bool { return len(w.servers("workers")) == 2 }, nil)
	w.loopFor(5*time.Second, func() {
		w.atMost("workers", 2)
		for _, n := range w.nodes() {
			if n.Spec.Unschedulable {
				t.Fatalf("node %s cordoned after the replacement failed", n.Name)
			}
		}
	})
	if got := w.servers("workers"); !sameServers(got, before) || w.boundOn("web-", "workers") != 2 {
		t.Fatalf("old servers or pods changed: %v (was %v)\n%s", got, before, w.describe())
	}
	_ = r
	w.noLeak()
	w.record("replacement-never-joins")
}

// DrainBlocked: a budget that allows no eviction holds the drain; when
// the drain timeout passes the old node serves on, uncordoned, its server
// kept, and the stop is on the node.
func DrainBlocked(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"drift": []string{"user_data"}, "joinTimeout": "1m", "drainTimeout": "5s"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 1)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 1 }, nil)
	before := w.servers("workers")
	r := w.startLifecycle(kind)
	r.mu.Lock()
	r.refuse["web-"] = true
	r.mu.Unlock()
	p.cloudInit = "#cloud-config\n# v2\n"
	w.setPools(p)
	w.loopUntil("the drain given up", 90*time.Second, func() bool { return w.stopped("drain did not finish") == 1 }, func() { w.atMost("workers", 2) })
	for _, n := range w.nodes() {
		if n.Name == before[0].Name && n.Spec.Unschedulable {
			t.Fatalf("the old node stays cordoned after the drain stopped\n%s", w.describe())
		}
	}
	if _, ok := w.fake.ServerByID(before[0].ID); !ok || w.boundOn("web-", "workers") != 1 {
		t.Fatalf("old server deleted or its pod moved although the drain was blocked\n%s", w.describe())
	}
	w.record("drain-blocked")
}

// OutsideWindow: with a maintenance window that is closed now, nothing is
// replaced.
func OutsideWindow(t *testing.T, kind Provider) {
	closed := time.Now().UTC().Add(3 * time.Hour)
	window := map[string]any{"schedule": fmt.Sprintf("%d %d * * *", closed.Minute(), closed.Hour()), "duration": "1h"}
	p := rollingPool(map[string]any{"drift": []string{"user_data"}, "windows": []any{window}})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 }, nil)
	before := w.servers("workers")
	r := w.startLifecycle(kind)
	p.cloudInit = "#cloud-config\n# v2\n"
	w.setPools(p)
	w.loopFor(reloadPeriod+5*time.Second, func() { w.atMost("workers", 2) })
	plan, err := r.ctrl.Plan(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Count(lifecycle.StateBlocked) != 2 || !strings.Contains(strings.Join(plan.Steps[0].Blocked, ";"), "outside the maintenance windows") {
		t.Fatalf("plan outside the window: %+v", plan.Steps)
	}
	if got := w.servers("workers"); !sameServers(got, before) {
		t.Fatalf("servers changed outside the window: %v (was %v)", got, before)
	}
	w.record("outside-window")
}

// stopped counts the nodes whose last replacement stopped for why.
func (w *world) stopped(why string) int {
	n := 0
	for _, node := range w.nodes() {
		if strings.Contains(node.Annotations[lifecycle.StoppedAnnotation], why) {
			n++
		}
	}
	return n
}

func sameServers(a, b []hcloudtest.ServerInfo) bool {
	if len(a) != len(b) {
		return false
	}
	ids := map[int64]bool{}
	for _, s := range a {
		ids[s.ID] = true
	}
	for _, s := range b {
		if !ids[s.ID] {
			return false
		}
	}
	return true
}

// withAgedServers adds n running servers of pool created age ago.
func withAgedServers(pool string, n int, age time.Duration) worldOption {
	return func(w *world) {
		for i := range n {
			if _, err := w.fake.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("%s-aged-%05d", pool, i), Created: time.Now().Add(-age),
				Labels: map[string]string{ServerLabelNodeGroup: pool, "hcloudscale/cluster": clusterName}}); err != nil {
				w.t.Fatal(err)
			}
		}
	}
}

// draining returns the nodes marked for a drain.
func (w *world) draining() int {
	n := 0
	for _, node := range w.nodes() {
		if strings.Contains(node.Annotations[lifecycle.ReplacementAnnotation], `"phase":"draining"`) {
			n++
		}
	}
	return n
}

// RemovedPoolDrained: the nodes of a pool removed from the configuration
// are drained out one at a time (cluster replace.removedPools) while the
// autoscaler scales the remaining pool up for their pods; the provider
// restarts in the middle; nothing leaks and every pod ends bound.
func RemovedPoolDrained(t *testing.T, kind Provider) {
	general := poolSpec{name: "general", serverType: "cx23", location: "fsn1", max: 3}
	old := poolSpec{name: "old", serverType: "cx23", location: "fsn1", max: 3}
	w := newWorld(t, kind, []poolSpec{general, old}, withConfigFile("old"))
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound on old", 60*time.Second, func() bool { return w.boundOn("web-", "old") == 2 }, nil)
	r := w.startLifecycle(kind)
	r.mu.Lock()
	r.refuse["web-"] = true // the first drain waits for the restart
	r.mu.Unlock()
	w.replace = map[string]any{"removedPools": true, "evictUnreplicatedPods": true}
	w.setPools(general)
	w.loopUntil("a drain-out started", 60*time.Second, func() bool { return w.draining() == 1 }, func() { w.atMost("old", 2) })
	r.restart()
	r.mu.Lock()
	r.refuse = map[string]bool{}
	r.mu.Unlock()
	w.loopUntil("the removed pool drained out", 180*time.Second, func() bool {
		return len(w.servers("old")) == 0 && w.boundOn("web-", "general") == 2 && w.pending() == 0
	}, func() { w.atMost("old", 2); w.atMost("general", 3) })
	w.noLeak()
	w.record("removed-pool-drained")
}

// LeaderHandOverMidReplacement: the leader stops leading while a node
// drains; it acts no more, and the next leader (a new provider and
// lifecycle) finishes the rollout from what the APIs show.
func LeaderHandOverMidReplacement(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"drift": []string{"user_data"}, "joinTimeout": "1m", "drainTimeout": "1m"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 }, nil)
	r := w.startLifecycle(kind)
	r.stop()
	var leads atomic.Bool
	leads.Store(true)
	r.run(leads.Load)
	r.mu.Lock()
	r.refuse["web-"] = true
	r.mu.Unlock()
	p.cloudInit = "#cloud-config\n# v2\n"
	w.setPools(p)
	w.loopUntil("a drain started", 60*time.Second, func() bool { return w.draining() == 1 }, r.check("workers", 3, 1))
	leads.Store(false)
	r.restart()
	r.mu.Lock()
	r.refuse = map[string]bool{}
	r.mu.Unlock()
	w.loopUntil("every node replaced", 180*time.Second, func() bool {
		return w.replaced("workers", 2) && len(w.nodes()) == 2 && w.boundOn("web-", "workers") == 2 && w.pending() == 0
	}, r.check("workers", 3, 1))
	w.noLeak()
	w.record("leader-hand-over")
}

// NodeRepaired: a server goes off and its node has not been Ready for
// longer than the pool's repairAfter: a replacement joins, then the old
// server is deleted without a drain (nothing is evicted) and its pod
// moves to the replacement; the autoscaler never removes the
// replacement, and the pool ends where it started.
func NodeRepaired(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"repairAfter": "15m", "joinTimeout": "1m"})
	w := newWorld(t, kind, []poolSpec{p}, withConfigFile("workers"))
	w.addPods(pods("web", 3)...)
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 3 }, nil)
	r := w.startLifecycle(kind)
	victim := w.servers("workers")[0]
	if err := w.fake.SetServerStatus(victim.ID, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	w.loopUntil("the node NotReady", 30*time.Second, func() bool { n := w.node(victim.Name); return n != nil && !ready(n) }, nil)
	// The replacement's node registers 5 s after its server runs: the old
	// server must wait for it.
	w.kubelet.SetRegisterDelay("workers", 5*time.Second)
	// The time that passes in a cluster before a repair is due.
	w.notReadySince(victim.Name, time.Now().Add(-20*time.Minute))
	check := r.check("workers", 4, 1)
	w.loopUntil("the node repaired", 120*time.Second, func() bool {
		_, there := w.fake.ServerByID(victim.ID)
		return !there && len(w.servers("workers")) == 3 && w.boundOn("web-", "workers") == 3 && w.pending() == 0
	}, func() {
		check()
		if _, there := w.fake.ServerByID(victim.ID); !there && !r.replacementJoined(victim.ID) {
			t.Fatalf("server %s deleted before its replacement's node was Ready\n%s", victim.Name, w.describe())
		}
	})
	r.mu.Lock()
	evicted := r.evicted
	r.mu.Unlock()
	if evicted != 0 {
		t.Fatalf("%d pods evicted; a repair evicts none\n%s", evicted, w.describe())
	}
	w.loopFor(unneededTime+3*time.Second, r.check("workers", 3, 0))
	w.noLeak()
	w.record("node-repaired")
}

// node returns the Node named name, nil if there is none.
func (w *world) node(name string) *corev1.Node {
	nodes := w.nodes()
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

// notReadySince dates the last transition of node name's Ready condition
// to t, as if it had gone NotReady then.
func (w *world) notReadySince(name string, t time.Time) {
	w.t.Helper()
	n, err := w.kube.KubeClient.CoreV1().Nodes().Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t)
		}
	}
	if _, err := w.kube.KubeClient.CoreV1().Nodes().UpdateStatus(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}
