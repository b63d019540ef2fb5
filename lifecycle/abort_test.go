package lifecycle_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// midReplacement starts the replacement of the single node of a pool and
// steps until the old node is marked phase, then turns the lifecycle off
// (closes the Controller, as serve without --replace-nodes would start).
// It returns the old node's and the replacement's names.
func midReplacement(t *testing.T, e *env, phase lifecycle.Phase) (old, repl string) {
	t.Helper()
	old = e.running()[0].Name
	e.mu.Lock()
	e.refuse["app-on-"+old] = true // the drain stays stuck
	e.mu.Unlock()
	e.reconfigure("#cloud-config\n# v2\n", map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}, nil)
	e.run(300, 1, 1, func() bool { return len(e.marked(phase)) == 1 })
	e.ctrl.Close()
	for _, s := range e.all() {
		if s.Name != old {
			repl = s.Name
		}
	}
	return old, repl
}

// rollBack runs RollBack on a Controller that never ran, as a process
// without the lifecycle does.
func (e *env) rollBack() []lifecycle.Undone {
	e.t.Helper()
	ctrl, err := lifecycle.New(e.cluster, e.kube, lifecycle.WithClock(e.clk))
	if err != nil {
		e.t.Fatal(err)
	}
	defer ctrl.Close()
	out, err := ctrl.RollBack(context.Background())
	if err != nil {
		e.t.Fatalf("RollBack: %v", err)
	}
	return out
}

// checkServes checks that node serves again: uncordoned, without marks.
func (e *env) checkServes(node string) {
	e.t.Helper()
	n := e.node(node)
	if n.Spec.Unschedulable {
		e.t.Errorf("%s stays cordoned", node)
	}
	if _, ok := n.Annotations[lifecycle.ReplacementAnnotation]; ok {
		e.t.Errorf("%s keeps its mark", node)
	}
}

// TestRollBackMidDrain: the lifecycle turned off while a drain is held by
// a budget. RollBack uncordons the old node and deletes the replacement
// that holds nothing but DaemonSet pods: the pool is back at its size,
// nothing marked or protected.
func TestRollBackMidDrain(t *testing.T) {
	e := newEnv(t, 1, map[string]any{"drift": []string{"user_data"}})
	old, repl := midReplacement(t, e, lifecycle.PhaseDraining)
	if err := e.kube.CoreV1().Pods("default").Delete(context.Background(), "app-on-"+repl, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.rollBack()
	if len(got) != 1 || got[0].Action != lifecycle.UndoneRolledBack || got[0].Node != old || got[0].Replacement != repl {
		t.Fatalf("RollBack = %+v; want %s rolled back", got, old)
	}
	e.settle(func() bool { return len(e.all()) == 1 })
	e.checkServes(old)
	if !containsName(e.all(), old) {
		t.Error("the old server was deleted")
	}
	if target := e.cluster.Pool("workers").TargetSize(); target != 1 {
		t.Errorf("target %d; want 1 as before the replacement", target)
	}
	if again := e.rollBack(); len(again) != 0 {
		t.Errorf("a second RollBack did %+v; want nothing left", again)
	}
}

// TestRollBackKeepsAReplacementThatHoldsPods: the replacement runs pods
// now, so it is kept without its protection, and a stop on the old node
// tells a lifecycle turned on again that the replacement ended.
func TestRollBackKeepsAReplacementThatHoldsPods(t *testing.T) {
	e := newEnv(t, 1, map[string]any{"drift": []string{"user_data"}})
	old, repl := midReplacement(t, e, lifecycle.PhaseDraining)
	got := e.rollBack()
	if len(got) != 1 || got[0].Action != lifecycle.UndoneKept {
		t.Fatalf("RollBack = %+v; want the replacement kept", got)
	}
	e.checkServes(old)
	if len(e.all()) != 2 {
		t.Errorf("%d servers; want the old one and the kept replacement", len(e.all()))
	}
	n := e.node(repl)
	if _, ok := n.Annotations[lifecycle.ScaleDownDisabledAnnotation]; ok {
		t.Error("the kept replacement keeps its scale-down protection")
	}
	var st lifecycle.Stop
	if err := json.Unmarshal([]byte(e.node(old).Annotations[lifecycle.StoppedAnnotation]), &st); err != nil || st.Replacement != repl {
		t.Errorf("stop on the old node %+v, %v; want one naming %s", st, err, repl)
	}
	// Turned on again: the kept server is an ordinary node, not a surge.
	e.ctrl, _ = lifecycle.New(e.cluster, e.kube, lifecycle.WithClock(e.clk), lifecycle.WithDrainOptions(nodedrain.Options{Backoff: time.Millisecond, Poll: time.Millisecond}))
	t.Cleanup(e.ctrl.Close)
	p, err := e.ctrl.Step(context.Background())
	if err != nil || p.Count(lifecycle.StateInProgress) != 0 {
		t.Fatalf("plan after the lifecycle came back: %+v, %v; want nothing in progress", p, err)
	}
}

// TestRollBackFinishesADrainedNodeOnlyBesideAReadyReplacement: an old
// node drained (phase deleting) is deleted when its replacement is Ready,
// and rolled back, never deleted, when the replacement is not Ready.
func TestRollBackFinishesADrainedNodeOnlyBesideAReadyReplacement(t *testing.T) {
	for _, replReady := range []bool{true, false} {
		e := newEnv(t, 1, map[string]any{"drift": []string{"user_data"}})
		old, repl := midReplacement(t, e, lifecycle.PhaseDraining)
		// The drain ended: the pod left, the mark says deleting.
		if err := e.kube.CoreV1().Pods("default").Delete(context.Background(), "app-on-"+old, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		mark, _ := json.Marshal(lifecycle.Mark{Replacement: repl, Phase: lifecycle.PhaseDeleting, Since: e.clk.Now()})
		e.patch(old, map[string]any{"metadata": map[string]any{"annotations": map[string]string{lifecycle.ReplacementAnnotation: string(mark)}}})
		if !replReady {
			n := e.node(repl)
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
			if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		got := e.rollBack()
		want := lifecycle.UndoneFinished
		if !replReady {
			want = lifecycle.UndoneKept // its node holds the kubelet's pod
		}
		if len(got) != 1 || got[0].Action != want {
			t.Fatalf("replacement Ready %v: RollBack = %+v; want %s", replReady, got, want)
		}
		e.settle(func() bool { return containsName(e.all(), old) != replReady })
		if !replReady {
			e.checkServes(old)
		}
	}
}

func (e *env) patch(node string, v map[string]any) {
	e.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := e.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestRollBackWhileOldServerDeletes: the lifecycle turned off while the
// old server's delete waits for Hetzner. RollBack leaves the old node as
// it is (cordoned and marked: uncordoned, it would take pods while it
// goes) and lifts the replacement's protection, as for a replacement
// whose old server is gone.
func TestRollBackWhileOldServerDeletes(t *testing.T) {
	e := newEnv(t, 1, map[string]any{"drift": []string{"user_data"}})
	old := e.running()[0].Name
	e.reconfigure("#cloud-config\n# v2\n", map[string]any{"drift": []string{"user_data"}}, nil)
	hold := e.api.HoldRequest("DELETE /servers/{id}", 1)
	var steps sync.WaitGroup
	defer steps.Wait()
	defer hold.Release()
	e.stepUntil(hold, &steps)
	repl := ""
	for _, s := range e.all() {
		if s.Name != old {
			repl = s.Name
		}
	}
	got := e.rollBack()
	if len(got) != 1 || got[0].Action != lifecycle.UndoneUnprotected || got[0].Node != repl {
		t.Errorf("RollBack = %+v; want the replacement %s unprotected and nothing else", got, repl)
	}
	n := e.node(old)
	if _, marked := n.Annotations[lifecycle.ReplacementAnnotation]; !marked || !n.Spec.Unschedulable {
		t.Errorf("old node %s: cordoned %v, annotations %v; want it left cordoned and marked while its server goes", old, n.Spec.Unschedulable, n.Annotations)
	}
	if _, ok := e.node(repl).Annotations[lifecycle.ProtectsAnnotation]; ok {
		t.Errorf("the replacement %s keeps its protection", repl)
	}
}
