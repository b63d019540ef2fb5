package nodedrain

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// pod returns a running pod of a ReplicaSet on node.
func pod(name, node string, mods ...func(*corev1.Pod)) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes, APIVersion: "apps/v1", UID: "rs"}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func annotated(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}

func daemonSet(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: &yes, APIVersion: "apps/v1", UID: "ds"}}
}

// evictions counts eviction requests by pod and answers them: refuse(pod,
// n) returns the error for the n-th request for pod (1-based), nil
// evicts (the pod is deleted, as the API server does).
type evictions struct {
	mu     sync.Mutex
	counts map[string]int
}

func fakeClient(refuse func(pod string, n int) error, objs ...runtime.Object) (*fake.Clientset, *evictions) {
	c := fake.NewClientset(objs...)
	ev := &evictions{counts: map[string]int{}}
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		e := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		ev.mu.Lock()
		ev.counts[e.Name]++
		n := ev.counts[e.Name]
		ev.mu.Unlock()
		if err := refuse(e.Name, n); err != nil {
			return true, nil, err
		}
		err := c.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, e.Namespace, e.Name)
		return true, nil, err
	})
	return c, ev
}

func (e *evictions) of(pod string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[pod]
}

func tooMany() error {
	return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
}

func remaining(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	list, err := c.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out
}

var fast = Options{Timeout: 5 * time.Second, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 5 * time.Millisecond}

func TestDrainEvictsAllButDaemonSetMirrorAndFinishedPods(t *testing.T) {
	c, ev := fakeClient(func(string, int) error { return nil },
		pod("web-1", "n1"), pod("web-2", "n1"),
		pod("agent", "n1", daemonSet),
		pod("static", "n1", annotated(mirrorAnnotation, "x")),
		pod("done", "n1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("elsewhere", "n2"),
	)
	if err := Drain(context.Background(), c, "n1", fast); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	got := strings.Join(remaining(t, c), ",")
	if got != "agent,done,elsewhere,static" {
		t.Errorf("pods left: %s, want agent,done,elsewhere,static", got)
	}
	for _, p := range []string{"agent", "static", "done", "elsewhere"} {
		if ev.of(p) != 0 {
			t.Errorf("pod %s was evicted", p)
		}
	}
}

func TestDrainRetriesEvictionsABudgetRefuses(t *testing.T) {
	c, ev := fakeClient(func(p string, n int) error {
		if p == "web-1" && n <= 2 {
			return tooMany()
		}
		return nil
	}, pod("web-1", "n1"), pod("web-2", "n1"))
	if err := Drain(context.Background(), c, "n1", fast); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if n := ev.of("web-1"); n != 3 {
		t.Errorf("evictions of web-1: %d, want 3 (two refused, one granted)", n)
	}
	if left := remaining(t, c); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

func TestDrainThatTimesOutNamesThePodsLeft(t *testing.T) {
	c, _ := fakeClient(func(p string, _ int) error {
		if p == "web-1" {
			return tooMany()
		}
		return nil
	}, pod("web-1", "n1"), pod("web-2", "n1"))
	o := fast
	o.Timeout = 200 * time.Millisecond
	start := time.Now()
	err := Drain(context.Background(), c, "n1", o)
	var blocked *BlockedError
	if !errors.As(err, &blocked) {
		t.Fatalf("Drain: %v, want a *BlockedError", err)
	}
	if d := time.Since(start); d < o.Timeout {
		t.Errorf("returned after %v, before the timeout %v", d, o.Timeout)
	}
	if len(blocked.Blockers) != 1 || blocked.Blockers[0].Pod != "app/web-1" ||
		!strings.Contains(blocked.Blockers[0].Reason, "disruption budget") {
		t.Errorf("blockers: %v, want app/web-1 refused by its budget", blocked.Blockers)
	}
	if left := strings.Join(remaining(t, c), ","); left != "web-1" {
		t.Errorf("pods left: %s, want web-1", left)
	}
}

func TestDrainEvictsNothingWhileAPodMustNotBeDisrupted(t *testing.T) {
	for _, mark := range []func(*corev1.Pod){
		annotated(DoNotDisruptAnnotation, "true"),
		annotated(SafeToEvictAnnotation, "false"),
	} {
		c, ev := fakeClient(func(string, int) error { return nil }, pod("web-1", "n1"), pod("db", "n1", mark))
		err := Drain(context.Background(), c, "n1", fast)
		var blocked *BlockedError
		if !errors.As(err, &blocked) || len(blocked.Blockers) != 1 || blocked.Blockers[0].Pod != "app/db" {
			t.Fatalf("Drain: %v, want blocked by app/db", err)
		}
		if ev.of("web-1")+ev.of("db") != 0 {
			t.Errorf("pods evicted although the drain was blocked")
		}
	}
}

func TestDrainStopsOnOtherErrors(t *testing.T) {
	c, _ := fakeClient(func(string, int) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-1", errors.New("no"))
	}, pod("web-1", "n1"))
	err := Drain(context.Background(), c, "n1", fast)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "app/web-1") {
		t.Fatalf("Drain: %v, want the 403 naming the pod", err)
	}
}

func TestCordonAndUncordon(t *testing.T) {
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	ctx := context.Background()
	for _, want := range []bool{true, false} {
		f := Uncordon
		if want {
			f = Cordon
		}
		if err := f(ctx, c, "n1"); err != nil {
			t.Fatal(err)
		}
		n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.Unschedulable != want {
			t.Errorf("unschedulable %v, want %v", n.Spec.Unschedulable, want)
		}
	}
	if err := Cordon(ctx, c, "gone"); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("Cordon of a missing node: %v", err)
	}
}

func TestBlockers(t *testing.T) {
	pdb := func(name string, allowed int32, observed int64) *policyv1.PodDisruptionBudget {
		one := intstr.FromInt32(1)
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", Generation: 1},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, ObservedGeneration: observed},
		}
	}
	other := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} }
	for _, tc := range []struct {
		name   string
		budget *policyv1.PodDisruptionBudget
		want   string
	}{
		{"budget allows one", pdb("web", 1, 1), "app/db: marked " + DoNotDisruptAnnotation + "=true"},
		{"budget allows none", pdb("web", 0, 1), "app/db: marked " + DoNotDisruptAnnotation + "=true|app/web-1: PodDisruptionBudget app/web allows no disruption now"},
		{"budget not computed yet", pdb("web", 1, 0), "app/db: marked " + DoNotDisruptAnnotation + "=true|app/web-1: PodDisruptionBudget app/web allows no disruption now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(tc.budget, pod("web-1", "n1"), pod("db", "n1", annotated(DoNotDisruptAnnotation, "true")),
				pod("web-2", "n2"), pod("free", "n1", other), pod("agent", "n1", daemonSet))
			bs, err := Blockers(context.Background(), c, "n1", Policy{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range bs {
				got = append(got, b.String())
			}
			if strings.Join(got, "|") != tc.want {
				t.Errorf("blockers:\n%s\nwant\n%s", strings.Join(got, "|"), tc.want)
			}
		})
	}
}

func bare(p *corev1.Pod) { p.OwnerReferences = nil }

func inKubeSystem(created time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Namespace, p.CreationTimestamp = "kube-system", metav1.NewTime(created) }
}

func volume(v corev1.Volume) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) }
}

func emptyDir(name string, medium corev1.StorageMedium) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
}

// TestBlockersFollowTheAutoscalersRules checks each drainability rule of
// the Cluster Autoscaler (pkg/simulator/drainability/rules at 33c3f97)
// that keeps a pod's node, and the Policy that lifts it.
func TestBlockersFollowTheAutoscalersRules(t *testing.T) {
	hostPath := corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/data"}}}
	old, young := time.Now().Add(-2*KubeSystemHold), time.Now().Add(-time.Minute)
	kubeSystemBudget := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "kube-system"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dns"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
	}
	dns := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "dns"} }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pol  Policy
		want Rule // "": the pod does not hold the drain
	}{
		{"controlled pod", pod("p", "n1"), Policy{}, ""},
		{"no controller", pod("p", "n1", bare), Policy{}, RuleUnreplicated},
		{"no controller, allowed", pod("p", "n1", bare), Policy{EvictUnreplicated: true}, ""},
		{"no controller, safe-to-evict true", pod("p", "n1", bare, annotated(SafeToEvictAnnotation, "true")), Policy{}, ""},
		{"no controller, left to complete", pod("p", "n1", bare, annotated(SafeToEvictAnnotation, "on-completion")), Policy{}, ""},
		{"no controller, terminating", pod("p", "n1", bare, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), Policy{}, ""},
		{"mirror pod", pod("p", "n1", bare, annotated(mirrorAnnotation, "x")), Policy{}, ""},
		{"annotated as a DaemonSet's", pod("p", "n1", bare, annotated(DaemonSetPodAnnotation, "true")), Policy{}, ""},
		{"marked and safe-to-evict true", pod("p", "n1", func(p *corev1.Pod) {
			p.Annotations = map[string]string{DoNotDisruptAnnotation: "true", SafeToEvictAnnotation: "true"}
		}), Policy{}, RuleMarked},
		{"safe-to-evict false, everything allowed", pod("p", "n1", bare, annotated(SafeToEvictAnnotation, "false")), Policy{true, true, true}, RuleMarked},
		{"emptyDir on disk", pod("p", "n1", volume(emptyDir("tmp", ""))), Policy{}, RuleLocalStorage},
		{"emptyDir in memory", pod("p", "n1", volume(emptyDir("tmp", corev1.StorageMediumMemory))), Policy{}, ""},
		{"hostPath", pod("p", "n1", volume(hostPath)), Policy{}, RuleLocalStorage},
		{"local volume accepted by name", pod("p", "n1", volume(hostPath), annotated(SafeToEvictLocalVolumesAnnotation, "other,host")), Policy{}, ""},
		{"local storage, allowed", pod("p", "n1", volume(hostPath)), Policy{EvictLocalStorage: true}, ""},
		{"local storage, safe-to-evict true", pod("p", "n1", volume(hostPath), annotated(SafeToEvictAnnotation, "true")), Policy{}, ""},
		{"kube-system, young, no budget", pod("p", "n1", inKubeSystem(young)), Policy{}, RuleKubeSystem},
		{"kube-system, no creation time", pod("p", "n1", inKubeSystem(time.Time{})), Policy{}, RuleKubeSystem},
		{"kube-system, past the hold", pod("p", "n1", inKubeSystem(old)), Policy{}, ""},
		{"kube-system, covered by a budget", pod("p", "n1", inKubeSystem(young), dns), Policy{}, ""},
		{"kube-system, allowed", pod("p", "n1", inKubeSystem(young)), Policy{EvictKubeSystem: true}, ""},
		{"kube-system, no controller: unreplicated first", pod("p", "n1", bare, inKubeSystem(young)), Policy{}, RuleUnreplicated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(tc.pod, kubeSystemBudget)
			bs, err := Blockers(context.Background(), c, "n1", tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			var got Rule
			if len(bs) > 1 {
				t.Fatalf("Blockers = %v; want at most one per pod", bs)
			}
			if len(bs) == 1 {
				got = bs[0].Rule
				if bs[0].Pod != key(tc.pod) || bs[0].Reason == "" {
					t.Errorf("Blockers = %v; want the pod %s with a reason", bs, key(tc.pod))
				}
			}
			if got != tc.want {
				t.Errorf("Blockers(%+v) rule = %q; want %q (%v)", tc.pol, got, tc.want, bs)
			}
		})
	}
}

// TestDrainNeverEvictsAnUnreplicatedPod: a pod without a controller is
// not evicted, and neither is anything else on its node, unless the
// policy accepts its loss.
func TestDrainNeverEvictsAnUnreplicatedPod(t *testing.T) {
	c, ev := fakeClient(func(string, int) error { return nil }, pod("web-1", "n1"), pod("lonely", "n1", bare))
	err := Drain(context.Background(), c, "n1", fast)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || len(blocked.Blockers) != 1 || blocked.Blockers[0].Pod != "app/lonely" || blocked.Blockers[0].Rule != RuleUnreplicated {
		t.Fatalf("Drain: %v; want blocked by app/lonely, not replicated", err)
	}
	if n := ev.of("web-1") + ev.of("lonely"); n != 0 {
		t.Errorf("%d evictions although the drain was blocked", n)
	}
	o := fast
	o.Policy.EvictUnreplicated = true
	if err := Drain(context.Background(), c, "n1", o); err != nil {
		t.Fatalf("Drain with EvictUnreplicated: %v", err)
	}
	if ev.of("lonely") != 1 {
		t.Errorf("evictions of app/lonely with EvictUnreplicated: %d, want 1", ev.of("lonely"))
	}
}

// TestDrainChecksEachPodBeforeItsEviction: a pod without a controller
// that lands on the node after the drain began (a pod bound by name,
// which a cordon does not stop) is never evicted; the drain ends blocked
// by it at its timeout.
func TestDrainChecksEachPodBeforeItsEviction(t *testing.T) {
	var c *fake.Clientset
	var ev *evictions
	c, ev = fakeClient(func(p string, n int) error {
		if p == "web-1" && n == 1 {
			late := pod("late", "n1", bare)
			if err := c.Tracker().Add(late); err != nil {
				return err
			}
			return tooMany()
		}
		return nil
	}, pod("web-1", "n1"))
	o := fast
	o.Timeout = 300 * time.Millisecond
	err := Drain(context.Background(), c, "n1", o)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || len(blocked.Blockers) != 1 || blocked.Blockers[0].Pod != "app/late" ||
		!strings.Contains(blocked.Blockers[0].Reason, "not replicated") {
		t.Fatalf("Drain: %v; want blocked by app/late, not replicated", err)
	}
	if ev.of("late") != 0 {
		t.Errorf("app/late was evicted")
	}
	if ev.of("web-1") < 2 {
		t.Errorf("evictions of web-1: %d; want it retried and evicted", ev.of("web-1"))
	}
}

// TestDrainLeavesAPodToComplete: safe-to-evict "on-completion" is never
// evicted; the drain waits for the pod to finish.
func TestDrainLeavesAPodToComplete(t *testing.T) {
	job := pod("job", "n1", annotated(SafeToEvictAnnotation, "on-completion"))
	c, ev := fakeClient(func(string, int) error { return nil }, job, pod("web-1", "n1"))
	done := make(chan error, 1)
	go func() { done <- Drain(context.Background(), c, "n1", fast) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v while the pod runs", err)
	default:
	}
	finished := job.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	if _, err := c.CoreV1().Pods("app").UpdateStatus(context.Background(), finished, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if ev.of("job") != 0 || ev.of("web-1") != 1 {
		t.Errorf("evictions: job %d, web-1 %d; want 0 and 1", ev.of("job"), ev.of("web-1"))
	}
}
