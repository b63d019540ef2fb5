package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/pool"
)

// The plan counts the surge room as pool.Surge does: a server being
// deleted counts against max + maxSurge until its delete ends, so the
// plan does not start a replacement Surge would refuse.
func TestPlanCountsDeletesInFlightAgainstTheSurge(t *testing.T) {
	w := testWorld(2, replaceAll()) // at max 2, maxSurge 1
	if p := w.plan(w.index()); p.Count(StateStart) != 1 {
		t.Fatalf("without deletes in flight: %+v", p.Steps)
	}
	w.pools[0].deleting = 1
	p := w.plan(w.index())
	if p.Count(StateStart) != 0 || !strings.Contains(strings.Join(p.Steps[0].Blocked, ";"), "1 deletes in flight") {
		t.Errorf("with a delete in flight: %+v", p.Steps)
	}
}

// A node of a removed pool gets no replacement: the plan prices none.
func TestPlanPricesNoReplacementForARemovedPool(t *testing.T) {
	w := testWorld(1, nil)
	w.cluster.RemovedPools = true
	w.pools[0].removed, w.pools[0].hourly, w.pools[0].priced = true, 0.02, true
	w.price = func(string, string) (float64, bool) { return 0.01, true }
	p := w.plan(w.index())
	if len(p.Steps) != 1 {
		t.Fatalf("plan: %+v", p.Steps)
	}
	if st := p.Steps[0]; st.PriceKnown || st.HourlyNew != 0 {
		t.Errorf("a node of a removed pool priced: %+v", st)
	}
}

// ReplacementNotStarted is recorded once per cause, not at every step.
func TestNotStartedOncePerCause(t *testing.T) {
	c := &Controller{notStarted: map[string]string{}}
	above := func(n int) error {
		return fmt.Errorf("pool %q: %w: surge: target size %d + 1", "workers", pool.ErrAboveMax, n)
	}
	if !c.newCause("n1", above(3)) {
		t.Error("the first cause was not new")
	}
	if c.newCause("n1", above(4)) {
		t.Error("the same cause with other counts was new again")
	}
	if !c.newCause("n1", errors.New("something else")) || !c.newCause("n2", above(3)) {
		t.Error("another cause, or another node, was not new")
	}
}
