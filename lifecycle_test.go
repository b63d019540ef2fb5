package hcloudscale_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/pool"
)

// lifecycleEvents are the status sequences a server that has run goes
// through when a person, `hcloud server ...` or Hetzner maintenance acts
// on it; each ends running.
var lifecycleEvents = []struct {
	name  string
	steps []hcloud.ServerStatus
}{
	{"power cycle", []hcloud.ServerStatus{hcloud.ServerStatusOff, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning}},
	{"reset", []hcloud.ServerStatus{hcloud.ServerStatusStarting, hcloud.ServerStatusRunning}},
	{"shutdown", []hcloud.ServerStatus{hcloud.ServerStatusStopping, hcloud.ServerStatusOff, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning}},
	{"rebuild", []hcloud.ServerStatus{hcloud.ServerStatusRebuilding, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning}},
	{"migration", []hcloud.ServerStatus{hcloud.ServerStatusMigrating, hcloud.ServerStatusRunning}},
	{"status flicker", []hcloud.ServerStatus{hcloud.ServerStatusUnknown, hcloud.ServerStatusRunning}},
}

// listNow moves the manual clock past the listing TTL (and its budget
// floor) and lets the Cluster list, as the autoscaler's next loop would.
func listNow(tb testing.TB, e *faultEnv) {
	tb.Helper()
	e.clock.Advance(2 * time.Minute)
	if err := e.c.Refresh(context.Background()); err != nil {
		tb.Errorf("Refresh: %v", err)
	}
}

// deleteFailedCreations is the autoscaler's deleteCreatedNodesWithErrors:
// every Creating instance with error info is deleted, without drain and
// without a min-size check of its own. It returns the IDs it deleted.
func deleteFailedCreations(tb testing.TB, e *faultEnv) []string {
	tb.Helper()
	var deleted []string
	for _, p := range e.c.Pools() {
		for _, in := range p.Instances() {
			if in.State != pool.Creating || in.Error == nil {
				continue
			}
			if err := p.DeleteInstances(context.Background(), []string{in.ID}); err != nil {
				tb.Errorf("the autoscaler's delete of failed creation %s: %v", in.ID, err)
			}
			deleted = append(deleted, in.ID)
		}
	}
	return deleted
}

// runLifecycleEvent takes a server through steps. After each status it
// lists, lets the simulated autoscaler delete the failed creations, and
// checks that the server is neither reported as one nor deleted, that
// every pool's target is within its bounds, and that a scale-down of the
// whole pool is refused below min.
func runLifecycleEvent(tb testing.TB, e *faultEnv, id int64, event string, steps []hcloud.ServerStatus) {
	tb.Helper()
	for _, status := range steps {
		if err := e.api().SetServerStatus(id, status); err != nil {
			tb.Fatalf("%s: SetServerStatus(%d, %s): %v", event, id, status, err)
		}
		listNow(tb, e)
		for _, del := range deleteFailedCreations(tb, e) {
			if del == fmt.Sprintf("hcloud://%d", id) {
				tb.Errorf("%s, %s: server %d reported as a failed creation and deleted by the autoscaler", event, status, id)
			}
		}
		if s, ok := e.api().ServerByID(id); !ok || s.Status == hcloud.ServerStatusDeleting {
			tb.Fatalf("%s, %s: server %d was deleted", event, status, id)
		}
		for _, p := range e.c.Pools() {
			if target := p.TargetSize(); target > p.MaxSize() {
				tb.Errorf("%s, %s: pool %s target %d above max %d", event, status, p.Name(), target, p.MaxSize())
			}
			if p.MinSize() == 0 || len(ids(p)) == 0 {
				continue
			}
			if err := p.DeleteInstances(context.Background(), ids(p)); !errors.Is(err, pool.ErrBelowMin) {
				tb.Errorf("%s, %s: deleting all of pool %s (min %d) = %v; want ErrBelowMin", event, status, p.Name(), p.MinSize(), err)
			}
		}
	}
}

// TestLifecycleEventsNeverDeleteALiveNode power-cycles, resets, shuts
// down, rebuilds, migrates and flickers servers that have run, young and
// a day old, in pools with and without a subnet range, each pool at its
// min size. After every status step: no live server is deleted (also not
// by the simulated autoscaler's failed-creation cleanup), min and max
// hold; at the end every invariant holds and every server runs.
func TestLifecycleEventsNeverDeleteALiveNode(t *testing.T) {
	for _, poolName := range []string{"plain", "subnet"} {
		for _, age := range []time.Duration{0, 24 * time.Hour} {
			t.Run(fmt.Sprintf("%s/age=%s", poolName, age), func(t *testing.T) {
				t.Parallel()
				e := newFaultEnv(t, faultOptions{nodes: []string{"2:4:cpx21:fsn1:plain", "2:4:cax11:nbg1:subnet"}})
				defer e.stop()
				p := e.c.Pool(poolName)
				if err := p.IncreaseSize(context.Background(), 2); err != nil {
					t.Fatal(err)
				}
				if err := e.settle(); err != nil {
					t.Fatal(err)
				}
				e.clock.Advance(age)
				servers := poolServers(t, e.api(), poolName)
				if len(servers) != 2 {
					t.Fatalf("pool %s holds %d servers; want 2", poolName, len(servers))
				}
				for i, ev := range lifecycleEvents {
					runLifecycleEvent(t, e, servers[i%2].ID, ev.name, ev.steps)
				}
				if err := e.settle(); err != nil {
					t.Fatal(err)
				}
				checkInvariants(t, observe(t, e.c, e.api()), nil)
				if st := p.Status(); st.Running != 2 || st.Target != 2 {
					t.Errorf("after the events: %+v; want the 2 servers running", st)
				}
				for _, s := range poolServers(t, e.api(), poolName) {
					if s.ID != servers[0].ID && s.ID != servers[1].ID {
						t.Errorf("server %d (%s) was created during the events; want none", s.ID, s.Name)
					}
				}
			})
		}
	}
}
