package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

var t0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC) // a Monday, 02:00 in Berlin

func readyNode(name string, id int64) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// testWorld is a pool "workers" of n running servers with nodes, all
// drifted in image, created a day before t0.
func testWorld(n int, rc *config.Replace) *world {
	pv := poolView{name: "workers", replace: rc, target: n, max: n, drift: map[int64][]pool.DriftReason{}}
	var nodes []*corev1.Node
	for i := range n {
		id := int64(100 + i)
		name := fmt.Sprintf("workers-%d", i)
		pv.servers = append(pv.servers, servercache.Server{ID: id, Name: name, Pool: "workers", Status: "running", ServerType: "cpx21", Location: "fsn1", Created: t0.Add(-24*time.Hour + time.Duration(i)*time.Minute)})
		pv.instances = append(pv.instances, pool.Instance{ID: fmt.Sprintf("hcloud://%d", id), ServerID: id, Name: name, State: pool.Running, Status: "running"})
		pv.drift[id] = []pool.DriftReason{pool.DriftImage}
		nodes = append(nodes, readyNode(name, id))
	}
	w := &world{now: t0, cluster: config.ClusterReplace{MaxInFlight: 10}, pools: []poolView{pv}}
	w.indexNodes(nodes)
	return w
}

func replaceAll() *config.Replace {
	return &config.Replace{Drift: []string{"image"}, MaxSurge: 1, MaxInFlight: 1, JoinTimeout: 10 * time.Minute, DrainTimeout: 15 * time.Minute, RetryAfter: time.Hour}
}

func states(p *Plan) map[string]string {
	out := map[string]string{}
	for _, st := range p.Steps {
		out[st.Node] = st.State
	}
	return out
}

func TestPlanStartsOneAndBlocksTheRestByBudget(t *testing.T) {
	w := testWorld(3, replaceAll())
	p := w.plan(w.index())
	if got := p.Count(StateStart); got != 1 {
		t.Fatalf("starts = %d; want 1 (maxInFlight 1): %+v", got, p.Steps)
	}
	if p.Steps[0].Node != "workers-0" || !p.Steps[0].Surge || !slices.Equal(p.Steps[0].Reasons, []string{"drift:image"}) {
		t.Errorf("first step = %+v; want the oldest node, a surge, drift:image", p.Steps[0])
	}
	for _, st := range p.Steps[1:] {
		if st.State != StateBlocked || !strings.Contains(strings.Join(st.Blocked, ";"), "maxInFlight") {
			t.Errorf("%s: %s %v; want blocked by maxInFlight", st.Node, st.State, st.Blocked)
		}
	}
}

func TestPlanRespectsOptIn(t *testing.T) {
	rc := replaceAll()
	rc.Drift = []string{"user_data"} // the servers drifted in image only
	w := testWorld(2, rc)
	if p := w.plan(w.index()); len(p.Steps) != 0 {
		t.Errorf("steps for a reason the pool did not enable: %+v", p.Steps)
	}
	w = testWorld(2, nil)
	if p := w.plan(w.index()); len(p.Steps) != 0 {
		t.Errorf("steps for a pool without replace: %+v", p.Steps)
	}
}

func TestPlanMaxSurgeZeroWaitsAtMax(t *testing.T) {
	rc := replaceAll()
	rc.MaxSurge = 0
	w := testWorld(2, rc)
	p := w.plan(w.index())
	if p.Count(StateStart) != 0 || !strings.Contains(strings.Join(p.Steps[0].Blocked, ";"), "max size 2") {
		t.Errorf("maxSurge 0 at max: %+v", p.Steps[0])
	}
	w.pools[0].max = 3 // room below max: no surge needed
	p = w.plan(w.index())
	if p.Count(StateStart) != 1 || p.Steps[0].Surge {
		t.Errorf("below max: %+v", p.Steps[0])
	}
}

func TestPlanWindows(t *testing.T) {
	rc := replaceAll()
	win, err := config.ParseWindow("0 2 * * *", 3*time.Hour, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	rc.Windows = []config.Window{win}
	w := testWorld(1, rc)
	w.now = t0.Add(30 * time.Minute) // 02:30 Berlin
	if p := w.plan(w.index()); p.Steps[0].State != StateStart {
		t.Errorf("inside the window: %+v", p.Steps[0])
	}
	w.now = t0.Add(4 * time.Hour) // 06:00 Berlin
	p := w.plan(w.index())
	if p.Steps[0].State != StateBlocked || !strings.Contains(p.Steps[0].Blocked[0], "next opens 2026-12-08T01:00:00Z") {
		t.Errorf("outside the window: %+v", p.Steps[0])
	}
	// The cluster's windows apply to a pool without its own.
	rc.Windows = nil
	w.cluster.Windows = []config.Window{win}
	if p := w.plan(w.index()); p.Steps[0].State != StateBlocked {
		t.Errorf("outside the cluster's window: %+v", p.Steps[0])
	}
}

func TestPlanExpiry(t *testing.T) {
	rc := &config.Replace{ExpireAfter: 24 * time.Hour, ExpireJitter: time.Hour, MaxSurge: 1, MaxInFlight: 5, RetryAfter: time.Hour}
	w := testWorld(50, rc)
	for id := range w.pools[0].drift {
		delete(w.pools[0].drift, id)
	}
	w.now = t0.Add(2 * time.Hour) // past every server's expiry and jitter
	p := w.plan(w.index())
	if len(p.Steps) != 50 {
		t.Fatalf("%d steps; want all 50 expired", len(p.Steps))
	}
	// At t0 no server is a full day plus its jitter old except those
	// whose jitter is small: the jitter spreads the pool.
	w.now = t0.Add(30 * time.Minute)
	due := len(w.plan(w.index()).Steps)
	if due == 0 || due == 50 {
		t.Errorf("%d of 50 due half-way through the jitter; want some, not all", due)
	}
}

func TestPlanPausedAndStopped(t *testing.T) {
	rc := replaceAll()
	rc.Paused = true
	w := testWorld(1, rc)
	if p := w.plan(w.index()); p.Steps[0].Blocked[0] != "paused" {
		t.Errorf("paused pool: %+v", p.Steps[0])
	}
	rc.Paused = false
	w.byName["workers-0"].Annotations[StoppedAnnotation] = encode(Stop{At: t0.Add(-10 * time.Minute), Reason: "drain blocked"})
	if p := w.plan(w.index()); p.Steps[0].State != StateBlocked || !strings.Contains(p.Steps[0].Blocked[0], "drain blocked") {
		t.Errorf("after a stop: %+v", p.Steps[0])
	}
	w.now = t0.Add(time.Hour)
	if p := w.plan(w.index()); p.Steps[0].State != StateStart {
		t.Errorf("after retryAfter: %+v", p.Steps[0])
	}
}

func TestPlanNodesAPersonCordonedAreLeftAlone(t *testing.T) {
	w := testWorld(1, replaceAll())
	w.byName["workers-0"].Spec.Unschedulable = true
	if p := w.plan(w.index()); p.Steps[0].State != StateBlocked {
		t.Errorf("cordoned node: %+v", p.Steps[0])
	}
}

// sim plays replacements through their phases at random and checks the
// budgets after every plan: the invariant is that no plan starts a
// replacement that takes a pool past maxInFlight, the cluster past its cap
// or a pool past max+maxSurge, and that nothing starts while paused or
// outside the window.
func TestPlanBudgetsUnderRandomInterleavings(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		rc := replaceAll()
		rc.MaxInFlight = 1 + rng.IntN(3)
		rc.MaxSurge = rng.IntN(3)
		n := 2 + rng.IntN(8)
		w := testWorld(n, rc)
		w.cluster.MaxInFlight = 1 + rng.IntN(4)
		win, _ := config.ParseWindow("0 * * * *", 20*time.Minute, "")
		if rng.IntN(2) == 0 {
			rc.Windows = []config.Window{win}
		}
		s := &simPool{w: w, rng: rng, next: 1000}
		for step := range 60 {
			w.now = t0.Add(time.Duration(step) * 7 * time.Minute)
			rc.Paused = rng.IntN(10) == 0
			p := w.plan(w.index())
			s.check(t, seed, p, rc)
			s.apply(p)
			s.advance()
		}
	}
}

type simPool struct {
	w    *world
	rng  *rand.Rand
	next int64
}

func (s *simPool) check(t *testing.T, seed uint64, p *Plan, rc *config.Replace) {
	t.Helper()
	pv := &s.w.pools[0]
	inProgress := p.Count(StateInProgress)
	starts := p.Count(StateStart)
	if inProgress+starts > rc.MaxInFlight || inProgress+starts > s.w.cluster.MaxInFlight && starts > 0 {
		t.Fatalf("seed %d: %d in progress + %d starts; pool max %d, cluster max %d", seed, inProgress, starts, rc.MaxInFlight, s.w.cluster.MaxInFlight)
	}
	surges := 0
	for _, st := range p.Steps {
		if st.State == StateStart && st.Surge {
			surges++
		}
	}
	if starts > 0 && pv.target+starts > pv.max+rc.MaxSurge {
		t.Fatalf("seed %d: target %d + %d starts > max %d + surge %d", seed, pv.target, starts, pv.max, rc.MaxSurge)
	}
	if open, _ := config.OpenAny(rc.Windows, s.w.now); starts > 0 && (rc.Paused || !open) {
		t.Fatalf("seed %d: %d starts while paused=%v open=%v", seed, starts, rc.Paused, open)
	}
}

// apply starts the plan's replacements as Surge would: a claim in the
// pool labelled with the old server.
func (s *simPool) apply(p *Plan) {
	pv := &s.w.pools[0]
	for _, st := range p.Steps {
		if st.State != StateStart {
			continue
		}
		s.next++
		name := fmt.Sprintf("workers-new-%d", s.next)
		pv.instances = append(pv.instances, pool.Instance{ID: pool.ClaimID("workers", name), Name: name, State: pool.Creating, Replaces: st.ServerID})
		pv.target++
	}
}

// advance moves each replacement on at random: its server appears and
// its node joins, its old server goes, or it fails and goes.
func (s *simPool) advance() {
	pv := &s.w.pools[0]
	for i := 0; i < len(pv.instances); i++ {
		in := &pv.instances[i]
		if in.Replaces == 0 {
			continue
		}
		switch s.rng.IntN(4) {
		case 0: // the server exists and its node is Ready
			if in.ServerID == 0 {
				s.next++
				in.ServerID, in.ID, in.State = s.next, fmt.Sprintf("hcloud://%d", s.next), pool.Running
				pv.servers = append(pv.servers, servercache.Server{ID: in.ServerID, Name: in.Name, Status: "running", Created: s.w.now,
					Labels: map[string]string{config.LabelReplaces: fmt.Sprint(in.Replaces)}})
				n := readyNode(in.Name, in.ServerID)
				s.w.byName[n.Name], s.w.nodes[in.ServerID] = n, n
			}
		case 1: // the old server is deleted
			if in.ServerID != 0 && s.remove(in.Replaces) {
				pv.target--
			}
		case 2: // the replacement fails and is deleted
			if s.rng.IntN(4) == 0 {
				id := in.ServerID
				pv.instances = slices.Delete(pv.instances, i, i+1)
				pv.target--
				if id != 0 {
					s.remove(id)
				}
				i--
			}
		}
	}
}

func (s *simPool) remove(id int64) bool {
	pv := &s.w.pools[0]
	i := slices.IndexFunc(pv.servers, func(x servercache.Server) bool { return x.ID == id })
	if i < 0 {
		return false
	}
	name := pv.servers[i].Name
	pv.servers = slices.Delete(pv.servers, i, i+1)
	pv.instances = slices.DeleteFunc(pv.instances, func(x pool.Instance) bool { return x.ServerID == id })
	delete(s.w.nodes, id)
	delete(s.w.byName, name)
	return true
}

// A NoExecute taint added to a pool (which the labeller leaves off nodes
// that run) makes its nodes due when the pool replaces for node_taints.
func TestPlanNodeTaints(t *testing.T) {
	rc := replaceAll()
	rc.Drift = []string{config.DriftNodeTaints}
	w := testWorld(2, rc)
	for id := range w.pools[0].drift {
		delete(w.pools[0].drift, id)
	}
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}
	if p := w.plan(w.index()); len(p.Steps) != 0 {
		t.Fatalf("due without a pool taint: %+v", p.Steps)
	}
	w.pools[0].taints = []corev1.Taint{taint}
	w.byName["workers-1"].Spec.Taints = []corev1.Taint{taint}
	p := w.plan(w.index())
	if len(p.Steps) != 1 || p.Steps[0].Node != "workers-0" || !slices.Equal(p.Steps[0].Reasons, []string{"drift:node_taints"}) {
		t.Errorf("plan: %+v; want workers-0 alone, for node_taints", p.Steps)
	}
	// A replacement that came up without the taint is not replaced
	// again and again: it is held, saying why.
	w.pools[0].servers[0].Labels = map[string]string{config.LabelReplaces: "99"}
	p = w.plan(w.index())
	if len(p.Steps) != 1 || p.Steps[0].State != StateBlocked || !strings.Contains(strings.Join(p.Steps[0].Blocked, ";"), "lacks the pool's taints as well") {
		t.Errorf("plan for a replacement without the taint: %+v", p.Steps)
	}
}

// The drift reasons a pool can name are package pool's, plus the node
// lifecycle's own.
func TestDriftReasonsArePools(t *testing.T) {
	want := []string{string(pool.DriftServerType), string(pool.DriftLocation), string(pool.DriftImage), string(pool.DriftPlacementGroup),
		string(pool.DriftNetwork), string(pool.DriftFirewalls), string(pool.DriftLabels), string(pool.DriftUserData), string(pool.DriftOffering), config.DriftNodeTaints}
	if !slices.Equal(config.DriftReasons, want) {
		t.Errorf("config.DriftReasons = %q; want %q", config.DriftReasons, want)
	}
}

// down makes node name of w not Ready since d before w.now.
func down(w *world, name string, d time.Duration) {
	n := w.byName[name]
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(w.now.Add(-d))}}
}

func TestPlanRepair(t *testing.T) {
	closed, err := config.ParseWindow("0 2 * * *", time.Hour, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	repairing := func() *config.Replace {
		rc := replaceAll()
		rc.Drift, rc.RepairAfter, rc.MaxInFlight, rc.MaxSurge = nil, 15*time.Minute, 3, 3
		rc.Windows = []config.Window{closed} // 01:00 UTC at t0: closed
		return rc
	}
	w := testWorld(10, repairing())
	down(w, "workers-0", 20*time.Minute)
	down(w, "workers-1", 10*time.Minute) // not yet
	w.pools[0].servers[0].Status = "off"
	p := w.plan(w.index())
	if len(p.Steps) != 1 || p.Steps[0].Node != "workers-0" || p.Steps[0].State != StateStart || !slices.Equal(p.Steps[0].Reasons, []string{ReasonNotReady}) {
		t.Fatalf("one node down 20m, one 10m, repairAfter 15m, outside the windows: %+v; want workers-0 started for repair alone", p.Steps)
	}
	// The drift of a node that is not Ready waits; its repair does not.
	w.pools[0].replace.Drift = []string{"image"}
	p = w.plan(w.index())
	if got := states(p); got["workers-0"] != StateStart || got["workers-1"] != StateBlocked || !slices.Contains(p.Steps[1].Blocked, "the node is not Ready") {
		t.Errorf("with drift: %+v", p.Steps)
	}

	// Three of ten down: more than 20% (2) of the cluster, a wider outage.
	w = testWorld(10, repairing())
	for _, n := range []string{"workers-0", "workers-1", "workers-2"} {
		down(w, n, time.Hour)
	}
	p = w.plan(w.index())
	if p.Count(StateBlocked) != 3 || !strings.Contains(p.Steps[0].Blocked[0], "3 of 10 nodes are unhealthy, more than replace.repairMaxUnhealthy (20%) allows") {
		t.Errorf("3 of 10 down under 20%%: %+v", p.Steps)
	}
	w.cluster.RepairMaxUnhealthy = config.Limit{Value: 3}
	if p = w.plan(w.index()); p.Count(StateStart) != 3 {
		t.Errorf("3 of 10 down under a limit of 3: %+v", p.Steps)
	}

	// A node a person cordoned is theirs, down or not; a pool without
	// repairAfter repairs nothing.
	w = testWorld(2, repairing())
	down(w, "workers-0", time.Hour)
	w.byName["workers-0"].Spec.Unschedulable = true
	if p = w.plan(w.index()); p.Count(StateBlocked) != 1 || !strings.Contains(p.Steps[0].Blocked[0], "cordoned") {
		t.Errorf("cordoned node down: %+v", p.Steps)
	}
	w.pools[0].replace.RepairAfter = 0
	w.pools[0].replace.Drift = []string{"labels"}
	if p = w.plan(w.index()); len(p.Steps) != 0 {
		t.Errorf("no repairAfter: %+v", p.Steps)
	}
}

// offeringWorld is a pool workers of two offerings, max 2: its two
// servers on the second (node group workers@cx33-nbg1), due for drift
// offering, the first offering's group empty and available.
func offeringWorld(rc *config.Replace) *world {
	w := testWorld(2, rc)
	second := &w.pools[0]
	second.name, second.family, second.moveTo = "workers@cx33-nbg1", "workers", "workers"
	for id := range second.drift {
		second.drift[id] = []pool.DriftReason{pool.DriftOffering}
	}
	first := poolView{name: "workers", family: "workers", replace: rc, max: 2, drift: map[int64][]pool.DriftReason{}}
	w.pools = append([]poolView{first}, w.pools...)
	return w
}

// A node due for drift offering is replaced into the earlier offering's
// group; maxInFlight and max + maxSurge count across the pool's groups; a
// sold-out target, or none left, holds the start.
func TestPlanOfferingAcrossGroups(t *testing.T) {
	rc := replaceAll()
	rc.Drift = []string{"offering"}
	w := offeringWorld(rc)
	p := w.plan(w.index())
	if len(p.Steps) != 2 || p.Steps[0].State != StateStart || p.Steps[0].Into != "workers" || !p.Steps[0].Surge ||
		p.Steps[1].State != StateBlocked || !strings.Contains(strings.Join(p.Steps[1].Blocked, ";"), "1 of 1 replacements") {
		t.Fatalf("plan %+v; want the first node starting into workers (a surge: 2 + 1 > max 2 across the groups), the second held by the pool's maxInFlight", p.Steps)
	}
	for _, tt := range []struct {
		name   string
		change func(w *world)
		want   string
	}{
		{"no surge room across the groups", func(w *world) { w.pools[0].target = 1 }, "max size 2 and may surge by 1"},
		{"target sold out", func(w *world) { w.pools[0].soldOut = true }, "node group workers is sold out"},
		{"no earlier offering left", func(w *world) { w.pools[1].moveTo = "" }, "no earlier offering"},
	} {
		w := offeringWorld(rc)
		tt.change(w)
		p := w.plan(w.index())
		if p.Count(StateStart) != 0 || !strings.Contains(strings.Join(p.Steps[0].Blocked, ";"), tt.want) {
			t.Errorf("%s: plan %+v; want nothing started, blocked by %q", tt.name, p.Steps, tt.want)
		}
	}
}
