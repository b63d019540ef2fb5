package e2e

import (
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// Scenarios are every scenario of the suite, to run against each kind of
// provider.
var Scenarios = []Scenario{
	{"ScaleFromZero", ScaleFromZero},
	{"FailOver", FailOver},
	{"NeverRegisters", NeverRegisters},
	{"UnknownStatus", UnknownStatus},
	{"PowerCycle", PowerCycle},
	{"MinMaxUnderPressure", MinMaxUnderPressure},
	{"ProviderRestart", ProviderRestart},
	{"AutoscalerRestart", AutoscalerRestart},
	{"APIBudget", APIBudget},
	{"PoolAdded", PoolAdded},
	{"PoolResized", PoolResized},
	{"PoolRemoved", PoolRemoved},
	{"BadReload", BadReload},
}

// Scenario is one scenario of the suite: Run runs it on a provider of
// kind.
type Scenario struct {
	Name string
	Run  func(t *testing.T, kind Provider)
}

var batchTaint = corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}

// pods returns n pods named prefix-0.. that each need a node of their own
// on a two-core server.
func pods(prefix string, n int, opts ...func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, Pod(fmt.Sprintf("%s-%d", prefix, i), "1500m", "1Gi", opts...))
	}
	return out
}

// atMost fails the test as soon as pool has more than n servers.
func (w *world) atMost(pool string, n int) {
	w.t.Helper()
	if got := len(w.servers(pool)); got > n {
		w.t.Fatalf("pool %s has %d servers, more than %d\n%s", pool, got, n, w.describe())
	}
}

// ScaleFromZero: three pools at zero; pending pods that select a pool
// by a label of its nodes (and tolerate its taint) make the autoscaler
// pick that pool from our templates alone and create exactly the servers
// the pods need; when the pods go, every pool returns to zero.
func ScaleFromZero(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{
		{name: "general", serverType: "cx33", location: "fsn1", max: 6, labels: map[string]string{"role": "general"}},
		{name: "batch", serverType: "cx23", location: "fsn1", max: 6, labels: map[string]string{"role": "batch"}, taints: []corev1.Taint{batchTaint}},
		{name: "arm", serverType: "cax11", location: "nbg1", max: 6, labels: map[string]string{"role": "general"}},
	})
	w.addPods(pods("batch", 4, WithNodeSelector(map[string]string{"role": "batch"}), WithToleration("dedicated", "batch"))...)
	w.addPods(pods("arm", 3, WithNodeSelector(map[string]string{"kubernetes.io/arch": "arm64"}))...)

	limits := func() { w.atMost("batch", 4); w.atMost("arm", 3); w.atMost("general", 0) }
	w.loopUntil("all pods bound", 60*time.Second, func() bool {
		return w.boundOn("batch-", "batch") == 4 && w.boundOn("arm-", "arm") == 3
	}, limits)
	up := w.stats.loops
	w.noLeak()

	w.deletePods("batch-")
	w.deletePods("arm-")
	w.loopUntil("every pool at zero", 60*time.Second, func() bool {
		return len(w.servers("")) == 0 && len(w.nodes()) == 0 && w.target("batch") == 0 && w.target("arm") == 0
	}, limits)
	w.noLeak()
	t.Logf("scale-up took %d loops, scale-down %d", up, w.stats.loops-up)
	w.record("scale-from-zero")
}

// FailOver: two pools whose nodes carry the same labels; the
// autoscaler prefers the first (least waste: its type is smaller; or the
// priority expander, which ranks it higher), whose servers cannot be
// created. It must back the first off (read from its
// node_group_backoff_status metric), end with the pods on the second,
// and leave no placeholder instance and no server behind.
func FailOver(t *testing.T, kind Provider) {
	cases := []failOverFault{
		{name: "sold out", fault: func(w *world, first poolSpec) { w.fake.SetUnavailable(first.serverType, first.location, true) }},
		{name: "placement group full", placementGroup: "spread", fault: func(w *world, _ poolSpec) {
			pg := w.placementGroupID("spread")
			for i := range hcloudtest.MaxPlacementGroupServers {
				if _, err := w.fake.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("other-%d", i), PlacementGroup: pg}); err != nil {
					w.t.Fatal(err)
				}
			}
		}},
	}
	expanders := []failOverExpander{
		// least-waste prefers the first pool: its type fits a pod of
		// 1.5 cores with the least left over.
		{name: "least-waste", firstType: "cx23", secondType: "cx33", secondServers: 2},
		// priority prefers the first pool although least-waste would
		// choose the second: the first is tried only if the priority
		// expander chooses.
		{name: "priority", firstType: "cx33", secondType: "cpx11", secondServers: 3,
			opts: []worldOption{withPriorities(map[int][]string{20: {"^first$"}, 10: {"^second$"}})}},
	}
	for _, tc := range cases {
		for _, ex := range expanders {
			t.Run(tc.name+"/"+ex.name, func(t *testing.T) { failOver(t, kind, tc, ex) })
		}
	}
}

// failOverFault is what makes creates in FailOver's first pool fail.
type failOverFault struct {
	name           string
	placementGroup string
	fault          func(w *world, first poolSpec)
}

// failOverExpander is how FailOver's autoscaler comes to prefer the
// first pool.
type failOverExpander struct {
	name                  string
	firstType, secondType string
	secondServers         int // what the pods need on the second pool
	opts                  []worldOption
}

// failOver is one case of FailOver.
func failOver(t *testing.T, kind Provider, tc failOverFault, ex failOverExpander) {
	worker := map[string]string{"role": "worker"}
	first := poolSpec{name: "first", serverType: ex.firstType, location: "fsn1", max: 5, labels: worker, placementGroup: tc.placementGroup}
	w := newWorld(t, kind, []poolSpec{first,
		{name: "second", serverType: ex.secondType, location: "nbg1", max: 5, labels: worker},
	}, append([]worldOption{withBackoff}, ex.opts...)...)
	tc.fault(w, first)
	w.addPods(pods("web", 3, WithNodeSelector(worker))...)
	w.loopUntil("pods bound on the second pool", 60*time.Second, func() bool {
		return w.boundOn("web-", "second") == 3
	}, func() {
		w.atMost("first", 0)
		w.atMost("second", ex.secondServers)
	})
	// The autoscaler holds the first pool backed off (5 min at the flag
	// defaults), for the failure it was told of.
	reasons, err := backoffReasons("first")
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) == 0 {
		t.Errorf("the first pool is not backed off: the autoscaler never tried it, or did not learn that it failed\n%s", w.describe())
	}
	if other, err := backoffReasons("second"); err != nil || len(other) != 0 {
		t.Errorf("the second pool is backed off for %v (%v)", other, err)
	}
	failOverLoops, since := w.failOverLoops()
	t.Logf("first pool backed off for %v; the second pool's first server created %d loop(s) after the first create; pods bound on it %v after the first create",
		reasons, failOverLoops, since.Round(100*time.Millisecond))
	w.loopUntil("no placeholder left", 20*time.Second, func() bool {
		return len(w.instances("first")) == 0 && w.target("first") == 0
	}, nil)
	if n, most := w.fake.Count("POST /servers"), 3+ex.secondServers; n > most {
		t.Errorf("%d creates, want at most 3 failed and %d good", n, ex.secondServers)
	}
	w.noLeak()
	w.record(fmt.Sprintf("fail-over/%s/%s backoff_reason=%s fail_over_loops=%d", tc.name, ex.name, strings.Join(reasons, ","), failOverLoops))
}

// failOverLoops returns the loops from the first create (the failed one)
// to the first create that succeeded, and the time since the first.
func (w *world) failOverLoops() (int, time.Duration) {
	w.t.Helper()
	var firstCreate, firstServer time.Time
	for _, r := range w.fake.Requests() {
		if r.Template != "POST /servers" {
			continue
		}
		if firstCreate.IsZero() {
			firstCreate = r.Time
		}
		if firstServer.IsZero() && r.Status == http.StatusCreated {
			firstServer = r.Time
		}
	}
	if firstCreate.IsZero() || firstServer.IsZero() {
		w.t.Fatalf("creates: first %v, first successful %v; want both", firstCreate, firstServer)
	}
	return w.loopAt(firstServer) - w.loopAt(firstCreate), time.Since(firstCreate)
}

// NeverRegisters: a server whose kubelet never joins is deleted after
// max-node-provision-time, the pool's target follows, and the autoscaler
// scales up again for the pod that is still pending.
func NeverRegisters(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 5}})
	w.kubelet.Withhold("workers", 1)
	w.addPods(pods("web", 2)...)
	check := func() {
		w.atMost("workers", 3)
		if tg, reg := w.target("workers"), len(w.nodes()); tg < reg {
			t.Fatalf("target %d below %d registered nodes", tg, reg)
		}
	}
	w.loopUntil("a server withheld", 30*time.Second, func() bool { return len(w.kubelet.Withheld()) == 1 }, check)
	withheld := w.kubelet.Withheld()[0]
	start := time.Now()
	w.loopUntil("the withheld server deleted and both pods bound", provisionTime+60*time.Second, func() bool {
		_, exists := w.fake.ServerByID(withheld)
		return !exists && w.boundOn("web-", "workers") == 2
	}, check)
	t.Logf("withheld server gone and pods bound %v after it was withheld", time.Since(start).Round(time.Second))
	if len(w.servers("workers")) != 2 {
		t.Errorf("%d servers, want 2\n%s", len(w.servers("workers")), w.describe())
	}
	w.noLeak()
	w.record("never-registers")
}

// UnknownStatus: a server that never registers and whose Hetzner status
// turns unknown. An instance the autoscaler counts neither as registered
// nor as expected to register (one with error info) would make its
// fixNodeGroupSize find a size DecreaseTargetSize cannot fix and skip
// every iteration after max-node-provision-time, so the pending pod would
// never get a node. The server must instead be an unregistered node: it
// is deleted after max-node-provision-time and the scale-up retried. The
// provision time is long enough for the provider's listing (one page per
// 20 s at least, its listing budget) to show the status first.
func UnknownStatus(t *testing.T, kind Provider) {
	const provision = 50 * time.Second
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 5}},
		withOptions(func(o *caconfig.AutoscalingOptions) { o.NodeGroupDefaults.MaxNodeProvisionTime = provision }))
	w.kubelet.Withhold("workers", 1)
	w.addPods(pods("web", 1)...)
	check := func() { w.atMost("workers", 2) }
	w.loopUntil("a server withheld", 30*time.Second, func() bool { return len(w.kubelet.Withheld()) == 1 }, check)
	withheld := w.kubelet.Withheld()[0]
	if err := w.fake.SetServerStatus(withheld, hcloud.ServerStatusUnknown); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	listings := w.fake.Count("GET /servers")
	sawUnknown := false
	w.loopUntil("the unknown server deleted and the pod bound", provision+60*time.Second, func() bool {
		_, exists := w.fake.ServerByID(withheld)
		// A listing while the server exists shows it unknown.
		sawUnknown = sawUnknown || (exists && w.fake.Count("GET /servers") > listings)
		return !exists && w.boundOn("web-", "workers") == 1
	}, check)
	t.Logf("unknown server gone and pod bound %v after its status turned unknown", time.Since(start).Round(time.Second))
	if !sawUnknown {
		t.Errorf("the server was never listed in status unknown before it went; the scenario proves nothing\n%s", w.describe())
	}
	w.noLeak()
	w.record("unknown-status")
}

// PowerCycle: a registered node whose server is switched off and on
// again (status off, then starting) is never deleted: the autoscaler's
// unready-node handling applies, not the failed-creation path. Each state
// lasts longer than hcloudscale's shortest time between two listings of
// one page (20 s, its listing budget), so that the provider sees both.
func PowerCycle(t *testing.T, kind Provider) {
	const cycle = 25 * time.Second
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 5}})
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound", 30*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 }, nil)
	victim := w.servers("workers")[0].ID
	check := func() {
		if _, ok := w.fake.ServerByID(victim); !ok {
			t.Fatalf("the power-cycled server %d was deleted\n%s", victim, w.describe())
		}
		w.atMost("workers", 2)
	}
	for _, phase := range []struct {
		status hcloud.ServerStatus
		d      time.Duration
	}{{hcloud.ServerStatusOff, cycle}, {hcloud.ServerStatusStarting, cycle}, {hcloud.ServerStatusRunning, 5 * time.Second}} {
		if err := w.fake.SetServerStatus(victim, phase.status); err != nil {
			t.Fatal(err)
		}
		w.loopFor(phase.d, check)
	}
	w.loopUntil("node ready again", 10*time.Second, func() bool {
		for _, n := range w.nodes() {
			if n.Spec.ProviderID == fmt.Sprintf("hcloud://%d", victim) {
				return ready(&n)
			}
		}
		return false
	}, check)
	w.noLeak()
	w.record("power-cycle")
}

// MinMaxUnderPressure: far more pending pods than the pool's max
// allows; the pool never exceeds max, and when the pods go it shrinks to
// min and never below.
func MinMaxUnderPressure(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", min: 1, max: 3}})
	reachedMin := false
	check := func() {
		w.atMost("workers", 3)
		if tg := w.target("workers"); tg > 3 {
			t.Fatalf("target %d above max 3", tg)
		}
		alive := 0
		for _, s := range w.servers("workers") {
			if s.Status != hcloud.ServerStatusDeleting {
				alive++
			}
		}
		if alive >= 1 {
			reachedMin = true
		} else if reachedMin {
			t.Fatalf("pool below min 1\n%s", w.describe())
		}
	}
	w.loopUntil("min size", 30*time.Second, func() bool { return len(w.nodes()) == 1 }, check)
	w.addPods(pods("web", 10)...)
	w.loopUntil("three pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 3 }, check)
	w.loopFor(5*time.Second, check)
	if got := w.pending(); got != 7 {
		t.Errorf("%d pods pending, want 7", got)
	}
	w.deletePods("web-")
	w.loopUntil("back at min", 60*time.Second, func() bool {
		return len(w.servers("workers")) == 1 && len(w.nodes()) == 1 && w.target("workers") == 1
	}, check)
	w.loopFor(unneededTime+3*time.Second, check)
	w.noLeak()
	w.record("min-max")
}

// ProviderRestart: our provider stops mid-scale-up (creates in flight
// cancelled) and a new one starts under the running autoscaler. No
// duplicate, no leak, every pod bound.
func ProviderRestart(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 6}})
	w.addPods(pods("web", 4)...)
	w.loopUntil("scale-up requested", 20*time.Second, func() bool { return w.target("workers") == 4 }, nil)
	w.waitFor("a server created", 5*time.Second, func() bool { return len(w.servers("workers")) > 0 })
	if len(w.nodes()) == 4 {
		t.Fatal("every server registered before the restart: nothing in flight")
	}
	w.restartProvider()
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 4 },
		func() { w.atMost("workers", 4) })
	w.loopFor(3*time.Second, func() { w.atMost("workers", 4) })
	w.noLeak()
	w.record("provider-restart")
}

// AutoscalerRestart: the autoscaler itself restarts mid-scale-up. The
// new one has no scale-up request for the servers in flight and counts
// them as no upcoming nodes, so it creates the pods' nodes again; the
// extra servers are removed as unneeded later. The test measures how many
// and for how long, and checks that it ends clean.
func AutoscalerRestart(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 10}})
	w.addPods(pods("web", 4)...)
	w.loopUntil("scale-up requested", 20*time.Second, func() bool { return w.target("workers") == 4 }, nil)
	if len(w.nodes()) == 4 {
		t.Fatal("every server registered before the restart: nothing in flight")
	}
	w.restartAutoscaler()
	restart := time.Now()
	peak := 0
	var extraSince time.Time
	var extraFor time.Duration
	measure := func() {
		n := len(w.servers("workers"))
		peak = max(peak, n)
		switch {
		case n > 4 && extraSince.IsZero():
			extraSince = time.Now()
		case n <= 4 && !extraSince.IsZero():
			extraFor += time.Since(extraSince)
			extraSince = time.Time{}
		}
	}
	w.loopUntil("pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 4 }, measure)
	w.loopUntil("back at four servers", 60*time.Second, func() bool {
		return len(w.servers("workers")) == 4 && len(w.nodes()) == 4 && w.target("workers") == 4
	}, measure)
	t.Logf("after the autoscaler restarted: peak %d servers for 4 pods, extra servers lived %v, clean %v after the restart",
		peak, extraFor.Round(100*time.Millisecond), time.Since(restart).Round(time.Second))
	w.noLeak()
	w.record(fmt.Sprintf("autoscaler-restart peak=%d extra_seconds=%.1f", peak, extraFor.Seconds()))
}

// APIBudget: a steady cluster of 200 nodes, nothing to scale, for 60
// loops (ten minutes of a production autoscaler at its 10 s scan
// interval, with the listing TTL scaled the same way to 6 s). Our
// requests are the listings and nothing else.
func APIBudget(t *testing.T, kind Provider) {
	const size = 200
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", min: size, max: size + 10}},
		withListTTL(6*time.Second), withServers("workers", size))
	w.loopUntil("all nodes registered", 30*time.Second, func() bool { return len(w.nodes()) == size }, nil)
	w.fake.ResetCounts()
	w.stats = stats{start: time.Now()}
	w.provider.spent.Store(0)
	w.provider.calls.Store(0)
	w.loopFor(60*loopPeriod, func() { w.atMost("workers", size) })
	counts := w.fake.Counts()
	for k := range counts {
		if k != "GET /servers" {
			t.Errorf("steady state made %d requests of %s", counts[k], k)
		}
	}
	t.Logf("provider share: %v in %d calls over %d loops (%v in RunOnce)", time.Duration(w.provider.spent.Load()).Round(time.Millisecond),
		w.provider.calls.Load(), w.stats.loops, w.stats.loopTime.Round(time.Millisecond))
	w.noLeak()
	w.record("api-budget-200")
}

// scaleMin returns the pool's min size for LoopAtScale: size, or
// $E2E_SCALE_MIN. Below size every node is a scale-down candidate, which
// costs the autoscaler more provider calls per node (its eligibility
// check asks for the pool's options); the unneeded time is then an hour,
// so that no node is removed while the loop is measured.
func scaleMin(t *testing.T, size int) (int, []worldOption) {
	v := os.Getenv("E2E_SCALE_MIN")
	if v == "" {
		return size, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > size {
		t.Fatalf("E2E_SCALE_MIN: %q is not a min size from 0 to %d", v, size)
	}
	return n, []worldOption{withOptions(func(o *caconfig.AutoscalingOptions) { o.NodeGroupDefaults.ScaleDownUnneededTime = time.Hour })}
}

// LoopAtScale measures the autoscaler's loop over a steady pool of size
// registered nodes: the mean RunOnce duration and the share of it spent
// inside the provider's methods, over loops loops. The pool's min size is
// its size (no node is a scale-down candidate), or $E2E_SCALE_MIN.
func LoopAtScale(t *testing.T, kind Provider, size, loops int) {
	minSize, opts := scaleMin(t, size)
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", min: minSize, max: size + 10}},
		append(opts, withListTTL(6*time.Second), withServers("workers", size))...)
	w.waitFor("all nodes registered", 5*time.Minute, func() bool { return len(w.nodes()) == size })
	w.loopUntil("target at size", time.Minute, func() bool { return w.target("workers") == size }, nil)
	w.runOnce() // the first loop over every node builds the autoscaler's caches
	// Nothing is pending and no server changes: the simulated kubelet and
	// scheduler would only take CPU from the autoscaler and its provider.
	defer w.pauseBackground()()
	w.fake.ResetCounts()
	w.stats = stats{start: time.Now()}
	w.provider.spent.Store(0)
	w.provider.calls.Store(0)
	// A provider in another process (serve) reports that process's CPU
	// time; in process, the provider's share is the time inside its calls.
	cpu, hasCPU := w.provider.current().(interface{ CPUTime() (time.Duration, error) })
	var cpu0 time.Duration
	if hasCPU {
		var err error
		if cpu0, err = cpu.CPUTime(); err != nil {
			t.Fatalf("provider CPU time: %v", err)
		}
	}
	// and the calls that reached it (the client answers some from its
	// caches).
	rpc, hasRPCs := w.provider.current().(interface{ RPCs() (int64, error) })
	var rpc0 int64
	if hasRPCs {
		var err error
		if rpc0, err = rpc.RPCs(); err != nil {
			t.Fatalf("provider RPCs: %v", err)
		}
	}
	stopProfile := loopProfile(t)
	self0 := processCPU(t)
	for range loops {
		w.runOnce()
	}
	selfCPU := (processCPU(t) - self0) / time.Duration(loops)
	stopProfile()
	rpcs := "n/a"
	if hasRPCs {
		rpc1, err := rpc.RPCs()
		if err != nil {
			t.Fatalf("provider RPCs: %v", err)
		}
		rpcs = fmt.Sprint((rpc1 - rpc0) / int64(loops))
	}
	serverCPU := "n/a"
	if hasCPU {
		cpu1, err := cpu.CPUTime()
		if err != nil {
			t.Fatalf("provider CPU time: %v", err)
		}
		serverCPU = fmt.Sprintf("%.0f", float64(((cpu1-cpu0)/time.Duration(loops)).Microseconds())/1000)
	}
	spent := time.Duration(w.provider.spent.Load())
	perLoop := w.stats.loopTime / time.Duration(loops)
	t.Logf("RESULT loop-at-scale provider=%s nodes=%d min=%d loops=%d loop_ms=%.1f loop_median_ms=%.1f provider_ms=%.1f share=%.0f%% server_cpu_ms_per_loop=%s autoscaler_cpu_ms_per_loop=%.0f calls_per_loop=%d rpcs_per_loop=%s requests=%d",
		kind.Name(), size, minSize, loops, float64(perLoop.Microseconds())/1000, float64(median(w.stats.loopTimes).Microseconds())/1000,
		float64((spent/time.Duration(loops)).Microseconds())/1000,
		100*float64(spent)/float64(max(w.stats.loopTime, 1)), serverCPU, float64(selfCPU.Microseconds())/1000, w.provider.calls.Load()/int64(loops), rpcs, len(w.fake.Requests()))
}

// processCPU is the CPU time (user and system) this process has used so
// far: the autoscaler, its clients and the in-memory APIs.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopProfile starts a CPU profile of this process into the file
// E2E_LOOP_CPUPROFILE names, if set; the returned function stops it.
func loopProfile(t *testing.T) func() {
	path := os.Getenv("E2E_LOOP_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("E2E_LOOP_CPUPROFILE: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatalf("E2E_LOOP_CPUPROFILE: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Errorf("E2E_LOOP_CPUPROFILE: %v", err)
		}
	}
}

// median returns the middle duration of ds (the mean of the two middle
// ones for an even count); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
