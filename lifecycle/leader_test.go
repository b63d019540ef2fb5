package lifecycle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// Leadership that ends stops the drains in progress before their next
// eviction, without waiting for a step: with WithLeader at the next
// eviction, with WithLeaderContext at once. The old node stays cordoned
// and marked for the next leader.
func TestLeadershipEndingStopsDrainsAtOnce(t *testing.T) {
	for _, how := range []string{"WithLeader", "WithLeaderContext"} {
		t.Run(how, func(t *testing.T) {
			rc := map[string]any{"drift": []string{"user_data"}, "drainTimeout": "1h"}
			e := newEnv(t, 1, rc)
			var leads atomic.Bool
			leads.Store(true)
			lead, end := context.WithCancel(context.Background())
			opt := lifecycle.WithLeader(leads.Load)
			if how == "WithLeaderContext" {
				opt = lifecycle.WithLeaderContext(func() context.Context { return lead })
			}
			ctrl, err := lifecycle.New(e.cluster, e.kube, opt, lifecycle.WithClock(e.clk), lifecycle.WithDrainOptions(drainOpts))
			if err != nil {
				t.Fatal(err)
			}
			defer ctrl.Close()
			e.ctrl.Close()
			e.ctrl = ctrl
			old := e.running()[0]
			e.mu.Lock()
			e.refuse["app-on-"+old.Name] = true
			e.mu.Unlock()
			e.reconfigure("#cloud-config\n# v2\n", rc, nil)
			e.run(200, 1, 1, func() bool { return len(e.marked(lifecycle.PhaseDraining)) == 1 })
			leads.Store(false)
			end()
			// An eviction sent before leadership ended may still be on its
			// way (and refused): let it land before the budget allows.
			time.Sleep(100 * time.Millisecond)
			e.mu.Lock()
			e.refuse = map[string]bool{} // the budget allows now
			e.mu.Unlock()
			time.Sleep(100 * time.Millisecond) // no step
			if n := e.evictedCount(); n != 0 {
				t.Errorf("%d pods evicted after leadership ended", n)
			}
			if _, ok := e.api.ServerByID(old.ID); !ok {
				t.Error("the old server was deleted after leadership ended")
			}
			if n := e.node(old.Name); !n.Spec.Unschedulable || len(e.marked(lifecycle.PhaseDraining)) != 1 {
				t.Error("the old node was not left cordoned and marked for the next leader")
			}
			if p, err := ctrl.Step(context.Background()); p != nil || err != nil {
				t.Errorf("Step after leadership ended: %v, %v", p, err)
			}
		})
	}
}
