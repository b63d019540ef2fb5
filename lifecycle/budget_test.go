package lifecycle_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
	"github.com/hcloudscale/hcloudscale/pool"
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

// A replacement holds its slot until its old server is gone: not only
// while the old node drains, but while the old server's delete request
// waits for Hetzner's answer and while its action runs, and again when
// that action fails and the server counts once more. With maxInFlight 1
// the next due node starts only once the old server is really gone.
func TestSlotHeldUntilOldServerGone(t *testing.T) {
	rc := map[string]any{"drift": []string{"user_data"}, "maxInFlight": 1}
	e := newEnv(t, 2, rc)
	ctx := context.Background()
	e.reconfigure("#cloud-config\n# v2\n", rc, nil)
	hold := e.api.HoldRequest("DELETE /servers/{id}", 1)
	defer hold.Release()
	var steps sync.WaitGroup
	defer steps.Wait()
	e.stepUntil(hold, &steps)
	first, second := e.heldSlot(ctx, "while the old server's delete request waits")
	// The delete is accepted, then its action fails: the server counts
	// again, its replacement still holds the slot, and the next step
	// deletes it again.
	e.api.FailAction("delete_server", "", "")
	hold.Release()
	e.settle(func() bool {
		in := e.instance(first)
		return in != nil && in.State != pool.Deleting
	})
	if got, _ := e.heldSlot(ctx, "after the old server's delete failed"); got != first {
		t.Fatalf("in progress: %s; want %s", got, first)
	}
	// Until the old server is gone, the second node waits.
	for i := 0; e.instance(first) != nil; i++ {
		if i == 200 {
			t.Fatalf("the old server %s is not gone after %d steps", first, i)
		}
		p, err := e.ctrl.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range p.Steps {
			if st.Node == second && st.State != lifecycle.StateBlocked && e.instance(first) != nil {
				t.Fatalf("%s %s while the old server %s is still there", second, st.State, first)
			}
		}
		time.Sleep(5 * time.Millisecond)
		_ = e.cluster.Refresh(ctx)
	}
	p, err := e.ctrl.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 || p.Steps[0].Node != second || p.Steps[0].State == lifecycle.StateBlocked {
		t.Errorf("once the old server is gone: %+v; want %s started", p.Steps, second)
	}
}

// heldSlot steps once and checks that the plan shows one replacement in
// progress, deleting its old server, and the other due node blocked by
// maxInFlight, with no second replacement started; it returns both nodes.
func (e *env) heldSlot(ctx context.Context, when string) (inProgress, blocked string) {
	e.t.Helper()
	p, err := e.ctrl.Step(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, st := range p.Steps {
		switch {
		case st.State == lifecycle.StateInProgress && st.Phase == lifecycle.PhaseDeleting && inProgress == "":
			inProgress = st.Node
		case st.State == lifecycle.StateBlocked && strings.Contains(strings.Join(st.Blocked, "; "), "1 of 1 replacements in progress") && blocked == "":
			blocked = st.Node
		default:
			e.t.Errorf("%s: unexpected step %+v", when, st)
		}
	}
	if inProgress == "" || blocked == "" {
		e.t.Fatalf("%s: plan %+v; want one node deleting and one blocked by maxInFlight", when, p.Steps)
	}
	n := 0
	for _, in := range e.cluster.Pool("workers").Instances() {
		if in.Replaces > 0 {
			n++
		}
	}
	if n != 1 {
		e.t.Errorf("%s: %d replacements; want 1", when, n)
	}
	return inProgress, blocked
}

func (e *env) instance(name string) *pool.Instance {
	for _, in := range e.cluster.Pool("workers").Instances() {
		if in.Name == name {
			return &in
		}
	}
	return nil
}

func (e *env) serverID(name string) int64 {
	for _, s := range e.all() {
		if s.Name == name {
			return s.ID
		}
	}
	return 0
}

// stepUntil steps until the held request has arrived. The held request may
// come from the drain or from a step: the steps run in the background, in
// steps, so that one waiting for the request does not stop the test.
func (e *env) stepUntil(hold *hcloudtest.Hold, steps *sync.WaitGroup) {
	for {
		stepped := make(chan struct{})
		steps.Go(func() {
			defer close(stepped)
			if _, err := e.ctrl.Step(context.Background()); err != nil {
				e.t.Errorf("Step: %v", err)
			}
		})
		select {
		case <-hold.Arrived():
			return
		case <-stepped:
			time.Sleep(5 * time.Millisecond)
			_ = e.cluster.Refresh(context.Background())
			e.kubelet()
		}
	}
}
