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

func pod(name, node string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
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
			bs, err := Blockers(context.Background(), c, "n1")
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
