package lifecycle_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// A node a pod holds (marked not to be disrupted) holds no replacement
// slot: with maxInFlight 1 the next due node starts, and the plan says
// what holds the first and nothing about a budget.
func TestNodeHeldByAPodHoldsNoSlot(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "maxInFlight": 1}
	e := newEnv(t, 2, rc)
	ctx := context.Background()
	plan, err := e.ctrl.Plan(ctx)
	if err != nil || len(plan.Steps) != 0 {
		t.Fatalf("before the change: %+v, %v", plan, err)
	}
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	plan, err = e.ctrl.Plan(ctx)
	if err != nil || plan.Count(lifecycle.StateStart) != 1 {
		t.Fatalf("plan: %+v, %v", plan, err)
	}
	first := plan.Steps[0].Node
	pod, err := e.kube.CoreV1().Pods("default").Get(ctx, "app-on-"+first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{nodedrain.DoNotDisruptAnnotation: "true"}
	if _, err := e.kube.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := e.ctrl.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Steps {
		why := strings.Join(st.Blocked, "; ")
		switch {
		case st.Node == first && (st.State != lifecycle.StateBlocked || !strings.Contains(why, "do-not-disrupt")):
			t.Errorf("%s: %s (%s); want blocked by its pod", st.Node, st.State, why)
		case st.Node != first && st.State != lifecycle.StateStart:
			t.Errorf("%s: %s (%s); want started: the held node holds no slot", st.Node, st.State, why)
		case strings.Contains(why, "maxInFlight"):
			t.Errorf("%s blocked by a budget nothing uses: %s", st.Node, why)
		}
	}
	if len(p.Steps) != 2 {
		t.Errorf("plan: %+v; want both nodes", p.Steps)
	}
}
