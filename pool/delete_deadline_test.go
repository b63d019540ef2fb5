package pool

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestDeleteOutcomeMatchesTheAPI checks that what DeleteInstances answers,
// what Instances and TargetSize say afterwards and what the API did agree,
// whether the caller's deadline passes after the API accepted the deletes
// (slow answers, many nodes in one call) or before anything was sent.
func TestDeleteOutcomeMatchesTheAPI(t *testing.T) {
	t.Run("deadline after the API accepted", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := scaled(t, e, "workers", 0, 10, 3)
		ins := p.Instances()
		// Every answer comes after the caller's deadline; the API acts
		// on the requests anyway.
		e.fake.SetLatency(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err := p.DeleteInstances(ctx, []string{ins[0].ID, ins[1].ID})
		if err != nil {
			t.Errorf("DeleteInstances = %v; want nil: the API accepted both deletes", err)
		}
		e.fake.SetLatency(0)
		for _, in := range ins[:2] {
			s, ok := e.fake.ServerByID(in.ServerID)
			if ok && s.Status != hcloud.ServerStatusDeleting {
				t.Errorf("server %d is %s in the API; want deleting or gone", in.ServerID, s.Status)
			}
		}
		if got := p.TargetSize(); got != 1 {
			t.Errorf("TargetSize() = %d; want 1", got)
		}
		if got := countStates(p.Instances()); got["running"] != 1 {
			t.Errorf("Instances() = %v; want one running, the others deleting or gone", got)
		}
		e.settle(p)
		e.eventually("the deletes to finish in the fake", 100*time.Millisecond, func() bool { return len(e.servers("workers")) == 1 })
		if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"running": 1}) {
			t.Errorf("Instances() after the deletes = %v; want one running", got)
		}
		if got := e.fake.Count("DELETE /servers/{id}"); got != 2 {
			t.Errorf("%d DELETE requests; want 2", got)
		}
	})
	t.Run("deadline before anything was sent", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		p := scaled(t, e, "workers", 0, 10, 2)
		ins := p.Instances()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := p.DeleteInstances(ctx, []string{ins[0].ID}); err == nil {
			t.Errorf("DeleteInstances with a cancelled context = nil; want an error: nothing was deleted")
		}
		if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
			t.Errorf("%d DELETE requests; want none", got)
		}
		if got := p.TargetSize(); got != 2 {
			t.Errorf("TargetSize() = %d; want 2", got)
		}
		if got := countStates(p.Instances()); !cmp.Equal(got, map[string]int{"running": 2}) {
			t.Errorf("Instances() = %v; want both running", got)
		}
	})
}
