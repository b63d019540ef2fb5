package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// setReady sets the Ready condition of a node, changed at at.
func (e *env) setReady(name string, status corev1.ConditionStatus, at time.Time) {
	e.t.Helper()
	n := e.node(name)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(at)}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A repair whose delete failed asks again before it retries: a node
// whose kubelet came back meanwhile is drained, not deleted.
func TestRepairOfANodeThatCameBackDrains(t *testing.T) {
	e := newEnv(t, 2, map[string]any{"repairAfter": "15m", "joinTimeout": "2m", "drainTimeout": "1h"})
	sick := e.running()[0]
	e.setReady(sick.Name, corev1.ConditionUnknown, e.clk.Now().Add(-20*time.Minute))
	e.mu.Lock()
	e.refuse["app-on-"+sick.Name] = true // a drain waits
	e.mu.Unlock()
	e.api.SetEndpointOutage("DELETE /servers/{id}", hcloudtest.RequestFault{Code: "server_error"})
	e.run(300, 2, 1, func() bool { return slices.Contains(e.marked(lifecycle.PhaseDeleting), sick.Name) })
	e.setReady(sick.Name, corev1.ConditionTrue, e.clk.Now())
	e.api.SetEndpointOutage("DELETE /servers/{id}")
	e.run(100, 2, 1, func() bool { return slices.Contains(e.marked(lifecycle.PhaseDraining), sick.Name) })
	for range 20 {
		if _, err := e.ctrl.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		if _, ok := e.api.ServerByID(sick.ID); !ok {
			t.Fatal("the node that came back was deleted while its drain was held")
		}
	}
	e.mu.Lock()
	e.refuse = map[string]bool{}
	e.mu.Unlock()
	e.run(300, 2, 1, func() bool { _, ok := e.api.ServerByID(sick.ID); return !ok })
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.evicted, "app-on-"+sick.Name) {
		t.Errorf("evicted %v; want the pod of the node that came back", e.evicted)
	}
}
