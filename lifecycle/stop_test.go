package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// replacementOf returns the running server other than old.
func (e *env) replacementOf(old hcloudtest.ServerInfo) hcloudtest.ServerInfo {
	e.t.Helper()
	for _, s := range e.running() {
		if s.ID != old.ID {
			return s
		}
	}
	e.t.Fatal("no replacement runs")
	return hcloudtest.ServerInfo{}
}

// joined steps until the replacement of old has a node, and returns it.
func (e *env) joined(old hcloudtest.ServerInfo) hcloudtest.ServerInfo {
	e.t.Helper()
	var repl hcloudtest.ServerInfo
	e.run(200, 1, 1, func() bool {
		if len(e.running()) < 2 {
			return false
		}
		repl = e.replacementOf(old)
		return e.node(repl.Name) != nil
	})
	return repl
}

func (e *env) evictedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.evicted)
}

// The invariant: no pod of the old node is evicted, and the old server is
// not deleted, unless its replacement exists, is Ready and is not being
// deleted. Here the replacement is deleted (as by the autoscaler's
// DeleteNodes) while a budget holds the old node's drain: the drain stops,
// the old node is uncordoned, and once the budget allows, nothing is
// evicted and the old server stays.
func TestReplacementDeletedMidDrainKeepsTheOldNode(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.mu.Lock()
	e.refuse["app-on-"+old.Name] = true
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 1, 1, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })
	repl := e.replacementOf(old)
	if err := e.cluster.Pool("workers").DeleteInstances(context.Background(), []string{fmt.Sprintf("hcloud://%d", repl.ID)}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.refuse = map[string]bool{} // the budget allows now
	e.mu.Unlock()
	time.Sleep(50 * time.Millisecond) // the drain's own retries, before any step
	e.run(100, 1, 1, func() bool {
		n := e.node(old.Name)
		return n != nil && !n.Spec.Unschedulable && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], repl.Name)
	})
	time.Sleep(50 * time.Millisecond)
	if n := e.evictedCount(); n != 0 {
		t.Errorf("%d pods evicted after the replacement was deleted", n)
	}
	if _, ok := e.api.ServerByID(old.ID); !ok {
		t.Fatal("the old server was deleted with its replacement gone")
	}
	if _, ok := e.node(old.Name).Annotations[lifecycle.ReplacementAnnotation]; ok {
		t.Error("the old node keeps its replacement mark")
	}
}

// A replacement whose node goes NotReady during the drain (its kubelet
// stopped) stops the drain before the next eviction: the old node serves
// on, uncordoned, with its server and its pod, and the stop names the
// replacement.
func TestReplacementNotReadyMidDrainKeepsTheOldNode(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.mu.Lock()
	e.refuse["app-on-"+old.Name] = true
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 1, 1, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })
	repl := e.replacementOf(old)
	e.setReady(repl.Name, corev1.ConditionFalse, e.clk.Now())
	e.mu.Lock()
	e.refuse = map[string]bool{} // the budget allows now
	e.mu.Unlock()
	time.Sleep(50 * time.Millisecond) // the drain's own retries, before any step
	e.run(100, 1, 1, func() bool {
		n := e.node(old.Name)
		return n != nil && !n.Spec.Unschedulable && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], repl.Name)
	})
	time.Sleep(50 * time.Millisecond)
	if n := e.evictedCount(); n != 0 {
		t.Errorf("%d pods evicted after the replacement's node went NotReady", n)
	}
	if _, ok := e.api.ServerByID(old.ID); !ok {
		t.Fatal("the old server was deleted with its replacement NotReady")
	}
}

// A replacement whose Node is still registered and Ready but that is
// being deleted (by its pool, or tainted by the autoscaler that is
// removing it) is never taken as ready: the old node is not cordoned and
// nothing is evicted.
func TestReplacementBeingDeletedIsNotReady(t *testing.T) {
	for _, how := range []string{"pool delete in flight", "autoscaler's taint", "node deleting"} {
		t.Run(how, func(t *testing.T) {
			rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
			e := newEnv(t, 1, rc)
			old := e.running()[0]
			e.reconfigure("#cloud-config\n# v2\n", rc, nil)
			repl := e.joined(old)
			ctx := context.Background()
			switch how {
			case "pool delete in flight":
				e.api.SetActionDuration("delete_server", 3*time.Second)
				if err := e.cluster.Pool("workers").DeleteInstances(ctx, []string{fmt.Sprintf("hcloud://%d", repl.ID)}); err != nil {
					t.Fatal(err)
				}
			case "autoscaler's taint":
				n := e.node(repl.Name)
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1", Effect: corev1.TaintEffectNoSchedule})
				if _, err := e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			case "node deleting":
				n := e.node(repl.Name)
				now := metav1.Now()
				n.DeletionTimestamp, n.Finalizers = &now, []string{"example.com/hold"}
				if _, err := e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 {
				if _, err := e.ctrl.Step(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
				if n := e.node(old.Name); n.Spec.Unschedulable {
					t.Fatal("the old node was cordoned for a replacement being deleted")
				}
			}
			if n := e.evictedCount(); n != 0 {
				t.Errorf("%d pods evicted for a replacement being deleted", n)
			}
			if _, ok := e.api.ServerByID(old.ID); !ok {
				t.Error("the old server was deleted")
			}
		})
	}
}

// A drain that does not finish leaves the pool at the size it started:
// a replacement that holds nothing but DaemonSet pods is deleted; one
// that took pods over stays as an ordinary node, unprotected.
func TestStoppedDrainSettlesTheReplacement(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(map[bool]string{false: "unused", true: "runs pods"}[busy], func(t *testing.T) {
			rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1s"}
			e := newEnv(t, 1, rc)
			old := e.running()[0]
			e.mu.Lock()
			e.refuse["app-on-"+old.Name] = true
			e.mu.Unlock()
			e.reconfigure("#cloud-config\n# v2\n", rc, nil)
			repl := e.joined(old)
			if !busy {
				e.daemonSetOnly(repl.Name)
			}
			e.run(300, 1, 1, func() bool {
				n := e.node(old.Name)
				return n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], "drain did not finish")
			})
			e.run(50, 1, 1, func() bool { return !e.protected() && (busy || len(e.all()) == 1) })
			_, kept := e.api.ServerByID(repl.ID)
			if kept != busy {
				t.Errorf("replacement kept = %v; want %v", kept, busy)
			}
			if _, ok := e.api.ServerByID(old.ID); !ok {
				t.Error("the old server was deleted")
			}
			if got, want := e.cluster.Pool("workers").TargetSize(), map[bool]int{false: 1, true: 2}[busy]; got != want {
				t.Errorf("target %d; want %d", got, want)
			}
		})
	}
}

// daemonSetOnly leaves node with a DaemonSet's pod only.
func (e *env) daemonSetOnly(node string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.kube.CoreV1().Pods("default").Delete(ctx, "app-on-"+node, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	yes := true
	ds := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-on-" + node, Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := e.kube.CoreV1().Pods("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A stop leaves a node cordoned that a person cordoned before the
// lifecycle took it out: only its own cordon is undone.
func TestStopKeepsAPersonsCordon(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1s"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.mu.Lock()
	e.refuse["app-on-"+old.Name] = true
	e.joins = false
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.run(200, 1, 1, func() bool { return len(e.running()) == 2 })
	n := e.node(old.Name)
	n.Spec.Unschedulable = true // a person, while the replacement joins
	if _, err := e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.joins = true
	e.mu.Unlock()
	e.run(300, 1, 1, func() bool {
		n := e.node(old.Name)
		return n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], "drain did not finish")
	})
	if !e.node(old.Name).Spec.Unschedulable {
		t.Error("the stop uncordoned a node a person had cordoned")
	}
}
