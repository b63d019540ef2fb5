package e2e

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// OfferingMovedBack: a pool at its max, workers on cx23 in fsn1 then cx33
// in nbg1, ordered by the priority expander's ConfigMap, whose drift
// lists offering. The first offering sells out and the pods get nodes
// on the second, as in OfferingFallback; the lifecycle runs beside the
// loop and starts nothing while the provider remembers the sell-out.
// Back in stock, it replaces the nodes of the second offering by nodes
// of the first, one at a time and surge-first: no pod is evicted before
// its node's replacement is Ready, never more than max + maxSurge
// servers across both offerings, the autoscaler never removes a
// replacement, and the pool ends with every node on the first offering,
// each offering's target its servers, nothing leaked.
func OfferingMovedBack(t *testing.T, kind Provider) {
	p := rollingPool(map[string]any{"drift": []string{"offering"}, "joinTimeout": "1m", "drainTimeout": "1m"})
	p.offerings = [][2]string{{"cx33", "nbg1"}}
	w := offeringWorld(t, kind, p)
	first, second := "workers", "workers@cx33-nbg1"

	w.fake.SetUnavailable("cx23", "fsn1", true)
	soldOut := time.Now()
	w.addPods(pods("web", 3)...)
	w.loopUntil("pods bound on the second offering", 60*time.Second, func() bool {
		return w.boundOnType("web-", "cx33") == 3
	}, func() { w.atMost("workers", 3) })
	var old []int64
	for _, sv := range w.servers("workers") {
		old = append(old, sv.ID)
	}
	r := w.startLifecycle(kind)
	w.fake.SetUnavailable("cx23", "fsn1", false)
	// A node of the larger cx33 holds up to two of the pods, its
	// replacement on cx23 one: the other waits for the autoscaler's
	// scale-up, so one old node's worth is two pods.
	w.loopUntil("every node moved to the first offering", 180*time.Second, func() bool {
		return w.serversOfType("workers", "cx33", "nbg1") == 0 && w.boundOnType("web-", "cx23") == 3 && w.pending() == 0
	}, func() { w.oneMoveAtATime(soldOut); r.check("workers", 4, 2)() })
	if time.Since(soldOut) < offeringUnavailableTTL {
		t.Errorf("moved within %v of the sell-out, before the provider's memory of it (%v) expired", time.Since(soldOut), offeringUnavailableTTL)
	}
	for _, id := range old {
		if !slices.ContainsFunc(w.servers("workers"), func(sv hcloudtest.ServerInfo) bool {
			return sv.Labels[config.LabelReplaces] == strconv.FormatInt(id, 10)
		}) {
			t.Errorf("the server %d of the second offering has no replacement on the first\n%s", id, w.describe())
		}
	}
	w.loopFor(unneededTime+3*time.Second, r.check("workers", 3, 0))
	if a, b, n := w.target(first), w.target(second), w.serversOfType("workers", "cx23", "fsn1"); a != n || b != 0 {
		t.Errorf("targets %d and %d; want %d (its servers) on the first offering and 0 on the second\n%s", a, b, n, w.describe())
	}
	w.noLeak()
	w.record("offering-moved-back")
}

// oneMoveAtATime checks a loop of OfferingMovedBack: every replacement is
// on the first offering, none before the provider's memory of the
// sell-out at soldOut can have expired, and at most one replaces a
// server that still exists (maxInFlight 1).
func (w *world) oneMoveAtATime(soldOut time.Time) {
	w.t.Helper()
	servers := w.servers("workers")
	live := 0
	for _, sv := range servers {
		id := sv.Labels[config.LabelReplaces]
		if id == "" {
			continue
		}
		if sv.ServerType != "cx23" || sv.Location != "fsn1" {
			w.t.Fatalf("replacement %s on %s in %s; want the first offering\n%s", sv.Name, sv.ServerType, sv.Location, w.describe())
		}
		if time.Since(soldOut) < offeringUnavailableTTL-time.Second {
			w.t.Fatalf("replacement %s while the provider remembers the first offering sold out\n%s", sv.Name, w.describe())
		}
		if slices.ContainsFunc(servers, func(o hcloudtest.ServerInfo) bool { return strconv.FormatInt(o.ID, 10) == id }) {
			live++
		}
	}
	if live > 1 {
		w.t.Fatalf("%d replacements in progress at once; maxInFlight is 1\n%s", live, w.describe())
	}
}
