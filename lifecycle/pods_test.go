package lifecycle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// addBarePod puts a pod that no controller owns on node.
func (e *env) addBarePod(name, node string) {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := e.kube.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) wasEvicted(pod string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.evicted, pod)
}

// stepBlocked steps n times and checks that every plan holds node,
// blocked by why, and that nothing was created, cordoned or evicted.
func (e *env) stepBlocked(n int, node, why string, servers int) {
	e.t.Helper()
	for range n {
		p, err := e.ctrl.Step(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		i := slices.IndexFunc(p.Steps, func(st lifecycle.Step) bool { return st.Node == node })
		if i < 0 || p.Steps[i].State != lifecycle.StateBlocked || !strings.Contains(strings.Join(p.Steps[i].Blocked, "; "), why) {
			e.t.Fatalf("plan %+v; want %s blocked by %q", p.Steps, node, why)
		}
		e.clk.Step(time.Minute)
		_ = e.cluster.Refresh(context.Background())
	}
	if got := len(e.all()); got != servers {
		e.t.Errorf("%d servers; want %d: a replacement was created for a node held by a pod", got, servers)
	}
	if n := e.node(node); n.Spec.Unschedulable {
		e.t.Errorf("node %s cordoned while held", node)
	}
}

// TestUnreplicatedPodHoldsItsNodesReplacement: a pod no controller owns
// holds its node's replacement, reported in the plan with the setting that
// accepts its loss; nothing starts, nothing is evicted. A pool's
// evictUnreplicatedPods false wins over the top-level true; once the
// reloaded configuration accepts the loss, the node is replaced.
func TestUnreplicatedPodHoldsItsNodesReplacement(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1m"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.addBarePod("lonely", old.Name)
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	e.stepBlocked(5, old.Name, "pod default/lonely: not replicated: no controller owns it, nothing would recreate it (replace.evictUnreplicatedPods accepts its loss)", 1)

	refuse := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1m", "evictUnreplicatedPods": false}
	e.reconfigure("#cloud-config\n# v2\n", refuse, map[string]any{"evictUnreplicatedPods": true})
	e.stepBlocked(3, old.Name, "not replicated", 1)
	if e.wasEvicted("lonely") {
		t.Fatal("the pod without a controller was evicted although no setting allowed it")
	}

	e.reconfigure("#cloud-config\n# v2\n", rc, map[string]any{"evictUnreplicatedPods": true})
	e.run(400, 1, 1, func() bool { return !containsName(e.all(), old.Name) && len(e.running()) == 1 })
	if !e.wasEvicted("lonely") {
		t.Error("the pod without a controller was not evicted although the cluster's replace.evictUnreplicatedPods allows it")
	}
}

// TestUnreplicatedPodArrivingMidReplacementStopsIt: a pod without a
// controller that lands on the old node after its replacement started is
// never evicted: the drain evicts nothing, stops, and uncordons the old
// node, which keeps its server; the plan then holds the node for the pod
// (after retryAfter too), so no replacement is started again and again.
func TestUnreplicatedPodArrivingMidReplacementStopsIt(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1m"}
	e := newEnv(t, 1, rc)
	old := e.running()[0]
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	started := false
	for i := 0; i < 100 && !started; i++ {
		p, err := e.ctrl.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		started = p.Count(lifecycle.StateStart) == 1
		_ = e.cluster.Refresh(context.Background())
	}
	if !started {
		t.Fatal("the replacement did not start")
	}
	e.addBarePod("lonely", old.Name)
	e.run(400, 1, 1, func() bool {
		n := e.node(old.Name)
		return n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], "not replicated")
	})
	e.mu.Lock()
	evicted := slices.Clone(e.evicted)
	e.mu.Unlock()
	if len(evicted) != 0 {
		t.Errorf("evicted %v; want nothing while a pod without a controller is on the node", evicted)
	}
	if n := e.node(old.Name); n.Spec.Unschedulable {
		t.Error("the old node stays cordoned after the stop")
	}
	if _, ok := e.api.ServerByID(old.ID); !ok {
		t.Fatal("the old server was deleted")
	}
	servers := len(e.all())
	e.clk.Step(2 * time.Hour) // past retryAfter
	e.stepBlocked(5, old.Name, "pod default/lonely: not replicated", servers)
	if e.wasEvicted("lonely") {
		t.Error("the pod without a controller was evicted")
	}
}
