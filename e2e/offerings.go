package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"

	"github.com/hcloudscale/hcloudscale/config"
)

// OfferingScenarios are the scenarios of the per-pool settings the
// built-in provider does not have (offerings, spread groups, public IPs
// per pool): run over our adapter and over serve.
var OfferingScenarios = []Scenario{
	{"OfferingFallback", OfferingFallback},
	{"SpreadPastTen", SpreadPastTen},
	{"PrivateOnlyPool", PrivateOnlyPool},
}

// Timings of OfferingFallback: the autoscaler backs a group off for less
// than the provider remembers a sold-out offering, so that the provider,
// not the backoff, keeps the autoscaler off the first offering once the
// backoff has passed.
const (
	offeringBackoff        = 8 * time.Second
	offeringUnavailableTTL = 25 * time.Second
)

// OfferingFallback: one pool, workers, on cx23 in fsn1 and then cx33 in
// nbg1, ordered by the priority expander's ConfigMap as hcloudscale
// priorities prints it. The first offering sells out (creates fail with
// resource_unavailable while the catalogue still offers it): the pods
// get servers of the second offering, no server of the first is ever
// created, and once the autoscaler's backoff has passed the first is
// not tried again while the provider remembers it sold out. Back in
// stock (the mark expired), new pods get servers of the first offering
// again, as the priorities say.
func OfferingFallback(t *testing.T, kind Provider) {
	worker := map[string]string{"role": "worker"}
	spec := poolSpec{name: "workers", serverType: "cx23", location: "fsn1", max: 6, labels: worker,
		offerings: [][2]string{{"cx33", "nbg1"}}}
	w := offeringWorld(t, kind, spec)
	first, second := "workers", "workers@cx33-nbg1"
	noneOnFirst := func() {
		if n := w.serversOfType("workers", "cx23", "fsn1"); n != 0 {
			t.Fatalf("%d servers of the sold-out offering\n%s", n, w.describe())
		}
		w.atMost("workers", 6)
	}

	w.fake.SetUnavailable("cx23", "fsn1", true)
	soldOut := time.Now()
	w.addPods(pods("web", 3, WithNodeSelector(worker))...)
	w.loopUntil("pods bound on the second offering", 60*time.Second, func() bool {
		return w.boundOnType("web-", "cx33") == 3
	}, noneOnFirst)
	reasons, err := backoffReasons(first)
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) == 0 {
		t.Errorf("the first offering is not backed off: the autoscaler never tried it, or did not learn that it failed\n%s", w.describe())
	}
	failOverLoops, since := w.failOverLoops()
	failed := w.failedCreates()
	t.Logf("first offering backed off for %v; the second offering's first server created %d loop(s) after the first create; pods bound %v after it; %d failed creates",
		reasons, failOverLoops, since.Round(100*time.Millisecond), failed)
	if failed == 0 || failed > 3 {
		t.Errorf("%d failed creates; want 1 to 3, those of the one scale-up that learned of the sell-out", failed)
	}

	// Past the autoscaler's backoff, the provider still knows the first
	// offering sold out: new pods that need a new node go to the second
	// without a create in the first (one fits beside the third web pod,
	// two need a new server).
	w.loopUntil("the autoscaler's backoff passed", 2*offeringBackoff, func() bool {
		return time.Since(soldOut) > offeringBackoff+2*time.Second
	}, noneOnFirst)
	secondBefore := w.serversOfType("workers", "cx33", "nbg1")
	w.addPods(pods("more", 3, WithNodeSelector(worker))...)
	w.loopUntil("the new pods bound on the second offering", 40*time.Second, func() bool {
		return w.boundOnType("more-", "cx33") == 3
	}, noneOnFirst)
	if n := w.serversOfType("workers", "cx33", "nbg1"); n <= secondBefore {
		t.Errorf("%d servers of the second offering, %d before the new pods: no scale-up was needed, so nothing was shown", n, secondBefore)
	}
	if n := w.failedCreates(); n != failed {
		t.Errorf("%d failed creates after the backoff, %d before: the sold-out offering was tried again", n, failed)
	}
	// A scale-up the provider refused at once (no create sent) would
	// have backed the first offering off again.
	if again, err := backoffReasons(first); err != nil || len(again) != 0 {
		t.Errorf("the first offering is backed off again for %v (%v): the autoscaler tried it while it was sold out", again, err)
	}
	if time.Since(soldOut) >= offeringUnavailableTTL {
		t.Fatalf("the phase took %v, past the provider's memory of the sell-out (%v): it checked nothing", time.Since(soldOut), offeringUnavailableTTL)
	}

	// Back in stock: once the provider's mark expires, new pods get
	// servers of the first offering.
	w.fake.SetUnavailable("cx23", "fsn1", false)
	w.loopUntil("the sell-out forgotten", 2*offeringUnavailableTTL, func() bool {
		return time.Since(soldOut) > offeringUnavailableTTL+2*time.Second
	}, nil)
	w.addPods(pods("late", 2, WithNodeSelector(worker))...)
	w.loopUntil("the late pods bound on the first offering", 60*time.Second, func() bool {
		return w.boundOnType("late-", "cx23") == 2
	}, func() { w.atMost("workers", 6) })
	if n, kept := w.target(second), w.serversOfType("workers", "cx33", "nbg1"); n != kept || n == 0 {
		t.Errorf("the second offering's target is %d with %d servers; want its servers kept (no drift reason offering)", n, kept)
	}
	w.loopUntil("no placeholder left", 20*time.Second, func() bool {
		return w.target(first) == w.serversOfType("workers", "cx23", "fsn1")
	}, nil)
	w.noLeak()
	w.record(fmt.Sprintf("offering-fallback fail_over_loops=%d backoff_reason=%s", failOverLoops, strings.Join(reasons, ",")))
}

// serversOfType counts the servers of pool of server type serverType in
// location.
func (w *world) serversOfType(pool, serverType, location string) int {
	n := 0
	for _, s := range w.servers(pool) {
		if s.ServerType == serverType && s.Location == location {
			n++
		}
	}
	return n
}

// offeringGroup is the node group of one offering of a pool.
type offeringGroup struct{ id, serverType, location string }

// offeringGroups returns the node groups of the pool's offerings, its
// own first; none for a pool without offerings.
func (p poolSpec) offeringGroups() []offeringGroup {
	if len(p.offerings) == 0 {
		return nil
	}
	out := []offeringGroup{{p.name, p.serverType, p.location}}
	for _, o := range p.offerings {
		out = append(out, offeringGroup{p.name + config.GroupSeparator + o[0] + "-" + o[1], o[0], o[1]})
	}
	return out
}

// boundOnType counts the pods whose name starts with prefix that are
// bound to nodes of server type serverType.
func (w *world) boundOnType(prefix, serverType string) int {
	return w.boundOnLabel(prefix, corev1.LabelInstanceTypeStable, serverType)
}

// failedCreates counts the create requests the fake refused.
func (w *world) failedCreates() int {
	n := 0
	for _, r := range w.fake.Requests() {
		if r.Template == "POST /servers" && r.Status != http.StatusCreated {
			n++
		}
	}
	return n
}

// PrivateOnlyPool: a pool with publicIPv4 and publicIPv6 false on
// HCLOUD_NETWORK beside a pool with the default public IPs. The private
// pool's servers join the network in their create request and have no
// primary IP; the pods get nodes on both pools; scaled back to zero,
// nothing is left.
func PrivateOnlyPool(t *testing.T, kind Provider) {
	private := map[string]string{"role": "private"}
	public := map[string]string{"role": "public"}
	w := newWorld(t, kind, []poolSpec{
		{name: "private", serverType: "cx23", location: "fsn1", max: 3, labels: private, private: true},
		{name: "public", serverType: "cx23", location: "fsn1", max: 3, labels: public},
	}, withNetwork("k8s"))
	w.addPods(pods("inside", 2, WithNodeSelector(private))...)
	w.addPods(pods("edge", 1, WithNodeSelector(public))...)
	w.loopUntil("pods bound on both pools", 60*time.Second, func() bool {
		return w.boundOn("inside-", "private") == 2 && w.boundOn("edge-", "public") == 1
	}, func() { w.atMost("private", 2); w.atMost("public", 1) })
	network := w.networkID
	for _, s := range w.servers("") {
		privateOnly := s.Labels[ServerLabelNodeGroup] == "private"
		onNetwork := slices.Contains(s.Networks, network)
		switch {
		case !onNetwork:
			t.Errorf("server %s is not on the network %d: %v", s.Name, network, s.Networks)
		case privateOnly && (s.PublicIPv4 != "" || s.PublicIPv6 != ""):
			t.Errorf("server %s of the private pool has public IPs %q, %q", s.Name, s.PublicIPv4, s.PublicIPv6)
		case !privateOnly && (s.PublicIPv4 == "" || s.PublicIPv6 == ""):
			t.Errorf("server %s of the public pool lacks a public IP: %q, %q", s.Name, s.PublicIPv4, s.PublicIPv6)
		}
	}
	if n := w.fake.Count("POST /servers/{id}/actions/attach_to_network"); n != 0 {
		t.Errorf("%d attach actions: the private pool's servers must join the network in their create request", n)
	}
	w.deletePods("inside-")
	w.deletePods("edge-")
	w.loopUntil("both pools back to zero", 60*time.Second, func() bool {
		return len(w.servers("")) == 0 && w.target("private") == 0 && w.target("public") == 0
	}, nil)
	w.noLeak()
	w.record("private-only-pool")
}

// offeringWorld is the world of the offering scenarios: spec is pool
// "workers" on cx23 in fsn1 with cx33 in nbg1 as its second offering,
// ordered by the priority expander's ConfigMap as `hcloudscale
// priorities` prints it, with the scenarios' backoff and the provider's
// memory of a sell-out.
func offeringWorld(t *testing.T, kind Provider, spec poolSpec) *world {
	cfg := config.Config{Pools: []config.Pool{{Name: "workers", ServerType: "cx23", Location: "fsn1",
		Offerings: []config.Offering{{ServerType: "cx23", Location: "fsn1"}, {ServerType: "cx33", Location: "nbg1"}}}}}
	return newWorld(t, kind, []poolSpec{spec},
		withPriorityData(config.PrioritiesYAML(cfg.Priorities())),
		withOptions(func(o *caconfig.AutoscalingOptions) {
			o.InitialNodeGroupBackoffDuration = offeringBackoff
			o.MaxNodeGroupBackoffDuration = offeringBackoff
			o.NodeGroupBackoffResetTimeout = time.Hour
		}),
		func(w *world) { w.unavailableTTL = offeringUnavailableTTL })
}
