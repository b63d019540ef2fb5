package lifecycle_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/nodedrain"
	"github.com/hcloudscale/hcloudscale/pool"
)

// event is one thing that may happen between two instants. Each draws
// the same number of random values whatever the world looks like (pick
// takes one), so that a seed gives the same sequence of events.
type event struct {
	name   string
	weight int
	do     func(s *sim, r *rand.Rand)
}

var simEvents = []event{
	{"step", 30, func(s *sim, _ *rand.Rand) { s.step() }},
	{"ca-increase", 3, (*sim).caIncrease},
	{"ca-delete", 3, (*sim).caDelete},
	{"ca-decrease", 2, (*sim).caDecrease},
	{"create-fails", 2, func(s *sim, _ *rand.Rand) { s.api.FailAction("create_server", "", "") }},
	{"never-joins", 2, func(s *sim, _ *rand.Rand) { s.joinNext++ }},
	{"person-deletes-server", 1, (*sim).personDeletes},
	{"person-powers-off", 1, (*sim).personPowersOff},
	{"person-powers-on", 1, (*sim).personPowersOn},
	{"slow-actions", 2, (*sim).slowActions},
	{"rate-limited", 2, (*sim).rateLimited},
	{"kubelet-down", 2, func(s *sim, r *rand.Rand) { s.kubeletToggle(r, true) }},
	{"kubelet-up", 2, func(s *sim, r *rand.Rand) { s.kubeletToggle(r, false) }},
	{"person-cordons", 1, (*sim).personCordons},
	{"pod-without-controller", 2, (*sim).soloPod},
	{"do-not-disrupt", 2, (*sim).doNotDisrupt},
	{"budget", 3, (*sim).budget},
	{"reload-drift", 4, func(s *sim, _ *rand.Rand) { s.cfg.version++; s.reload() }},
	{"reload-drift-off", 1, func(s *sim, _ *rand.Rand) { s.cfg.driftOff = !s.cfg.driftOff; s.reload() }},
	{"reload-pause", 1, func(s *sim, _ *rand.Rand) { s.cfg.paused = !s.cfg.paused; s.reload() }},
	{"reload-remove-pool", 1, func(s *sim, _ *rand.Rand) { s.cfg.batchRemoved = !s.cfg.batchRemoved; s.reload() }},
	{"reload-max", 1, func(s *sim, _ *rand.Rand) { s.cfg.workersMax = 8 - s.cfg.workersMax; s.reload() }},
	{"restart", 1, func(s *sim, _ *rand.Rand) { s.restart() }},
	{"hand-over", 1, func(s *sim, _ *rand.Rand) { s.handOver() }},
}

// simOfferingEvents happen too when workers has offerings: its first
// offering sells out (creates there fail with resource_unavailable, which
// the pool remembers) and comes back (once the pool's memory expires);
// reloads take the second offering out of the list and put it first.
var simOfferingEvents = []event{
	{"sell-out", 3, func(s *sim, _ *rand.Rand) { s.api.SetUnavailable("cx23", "fsn1", true) }},
	{"back-in-stock", 3, func(s *sim, _ *rand.Rand) { s.api.SetUnavailable("cx23", "fsn1", false) }},
	{"reload-offering-out", 1, func(s *sim, _ *rand.Rand) { s.cfg.secondOut = !s.cfg.secondOut; s.reload() }},
	{"reload-offerings-swapped", 1, func(s *sim, _ *rand.Rand) { s.cfg.swapped = !s.cfg.swapped; s.reload() }},
}

// offeringEvents are the events of the simulation with offerings:
// simEvents without rate-limited, plus simOfferingEvents. A 429 on the
// old server's DELETE has the pool send it again after the lifecycle's
// last check of the replacement, which may have gone not Ready meanwhile
// (delete-live); that window is the pool's delete retry, not the
// offerings', and is left out here so that this simulation fails on what
// it adds.
func offeringEvents() []event {
	out := slices.DeleteFunc(slices.Clone(simEvents), func(e event) bool { return e.name == "rate-limited" })
	return append(out, simOfferingEvents...)
}

func pickEvent(r *rand.Rand, events []event) event {
	total := 0
	for _, e := range events {
		total += e.weight
	}
	n := r.IntN(total)
	for _, e := range events {
		if n < e.weight {
			return e
		}
		n -= e.weight
	}
	panic("unreachable")
}

// pick returns one of items by one random draw; ok false when empty.
func pick[T any](r *rand.Rand, items []T) (T, bool) {
	n := r.Uint64()
	var zero T
	if len(items) == 0 {
		return zero, false
	}
	return items[n%uint64(len(items))], true
}

func (s *sim) step() {
	if _, err := s.live.ctrl.Step(context.Background()); err != nil {
		s.trace("step: %v", err)
	}
}

// autoscaler is the context of the autoscaler's calls: its deletes are
// its own decisions, which the lifecycle's invariants do not judge.
func autoscaler() context.Context { return context.WithValue(context.Background(), actorKey{}, true) }

func (s *sim) pools() []*pool.Pool {
	ps := s.live.cluster.Pools()
	slices.SortFunc(ps, func(a, b *pool.Pool) int { return strings.Compare(a.Name(), b.Name()) })
	return ps
}

func (s *sim) caIncrease(r *rand.Rand) {
	p, _ := pick(r, s.pools())
	n := 1 + r.IntN(2)
	s.trace("autoscaler: IncreaseSize(%s, %d): %v", p.Name(), n, p.IncreaseSize(autoscaler(), n))
}

// caDelete deletes any instance of any pool: a replacement, an old node
// mid-drain, a claim.
func (s *sim) caDelete(r *rand.Rand) {
	var all []pool.Instance
	byID := map[string]*pool.Pool{}
	for _, p := range s.pools() {
		for _, in := range p.Instances() {
			all = append(all, in)
			byID[in.ID] = p
		}
	}
	// Servers by ID; claims, whose names are random, last.
	slices.SortStableFunc(all, func(a, b pool.Instance) int {
		return cmp.Or(cmp.Compare(claimLast(a), claimLast(b)), cmp.Compare(a.ServerID, b.ServerID))
	})
	// Half the time a replacement: an empty new node is what the
	// autoscaler's scale-down likes best.
	var repl []pool.Instance
	for _, in := range all {
		if in.Replaces != 0 {
			repl = append(repl, in)
		}
	}
	in, ok := pick(r, all)
	if r.IntN(2) == 0 && len(repl) > 0 {
		in, ok = pick(r, repl)
	} else {
		r.Uint64() // the same draws either way
	}
	if !ok {
		return
	}
	s.caDeleted[in.Name] = true // a claim's flow deletes its server later, untagged
	s.trace("autoscaler: DeleteNodes(%s, %s %s): %v", byID[in.ID].Name(), in.ID, in.Name, byID[in.ID].DeleteInstances(autoscaler(), []string{in.ID}))
}

func claimLast(in pool.Instance) int {
	if in.ServerID == 0 {
		return 1
	}
	return 0
}

func (s *sim) caDecrease(r *rand.Rand) {
	p, _ := pick(r, s.pools())
	s.trace("autoscaler: DecreaseTargetSize(%s, -1): %v", p.Name(), p.DecreaseTargetSize(autoscaler(), -1))
}

// caLoop is what the autoscaler does every loop: it deletes the failed
// creations, and the servers that did not register a node within its
// max-node-provision-time (15 minutes).
func (s *sim) caLoop() {
	for _, p := range s.pools() {
		var ids []string
		for _, in := range p.Instances() {
			sv, ok := s.api.ServerByID(in.ServerID)
			late := ok && s.node(sv.Name) == nil && time.Since(sv.Created) > 15*time.Minute
			if in.Error != nil && in.State == pool.Creating || late {
				ids = append(ids, in.ID)
			}
		}
		if len(ids) > 0 {
			s.trace("autoscaler: DeleteNodes(%s, %v) (failed or unregistered): %v", p.Name(), ids, p.DeleteInstances(autoscaler(), ids))
		}
	}
	s.scaleUpForPending()
}

// scaleUpForPending plays the autoscaler's scale-up: while pods are
// pending (no Ready, schedulable node takes them) and no node is coming
// up, it asks the first configured pool below its max for one more. Without
// it a removed pool's node could never be drained out once every other
// pool had lost its nodes: its evicted pods would stay pending, the budget
// would hold the drain, and it would stop and retry for ever.
func (s *sim) scaleUpForPending() {
	if !slices.ContainsFunc(s.pods(), func(p *corev1.Pod) bool { return p.Spec.NodeName == "" }) {
		return
	}
	for _, p := range s.pools() {
		for _, in := range p.Instances() {
			sv, ok := s.api.ServerByID(in.ServerID)
			joining := ok && sv.Status == hcloud.ServerStatusRunning && s.node(sv.Name) == nil && !s.neverJoin[sv.Name]
			if in.State == pool.Creating && in.Error == nil || joining {
				return // a node is coming up
			}
		}
	}
	for _, p := range s.pools() {
		if !p.Removed() && p.TargetSize() < p.MaxSize() {
			s.trace("autoscaler: IncreaseSize(%s, 1) for pending pods: %v", p.Name(), p.IncreaseSize(autoscaler(), 1))
			return
		}
	}
}

func (s *sim) personDeletes(r *rand.Rand) {
	if sv, ok := pick(r, s.servers()); ok {
		s.trace("person: deletes server %s", sv.Name)
		s.api.DeleteServerNow(sv.ID)
	}
}

func (s *sim) personPowersOff(r *rand.Rand) {
	if sv, ok := pick(r, s.servers()); ok && sv.Status == hcloud.ServerStatusRunning {
		s.trace("person: powers off %s", sv.Name)
		s.must(s.api.SetServerStatus(sv.ID, hcloud.ServerStatusOff))
	}
}

func (s *sim) personPowersOn(r *rand.Rand) {
	var off []hcloudtest.ServerInfo
	for _, sv := range s.servers() {
		if sv.Status == hcloud.ServerStatusOff {
			off = append(off, sv)
		}
	}
	if sv, ok := pick(r, off); ok {
		s.trace("person: powers on %s", sv.Name)
		s.must(s.api.SetServerStatus(sv.ID, hcloud.ServerStatusRunning))
	}
}

func (s *sim) slowActions(r *rand.Rand) {
	d := []time.Duration{5 * time.Second, 90 * time.Second, 10 * time.Minute}[r.IntN(3)]
	s.trace("hetzner: create and delete actions take %v", d)
	s.api.SetActionDuration("create_server", d)
	s.api.SetActionDuration("delete_server", min(d, time.Minute))
}

func (s *sim) rateLimited(r *rand.Rand) {
	tmpl := []string{"POST /servers", "DELETE /servers/{id}", "GET /servers", "GET /actions"}[r.IntN(4)]
	n := 1 + r.IntN(3)
	s.trace("hetzner: the next %d %s answer 429", n, tmpl)
	for i := range n {
		s.api.FailRequest(tmpl, i+1, hcloudtest.RequestFault{Code: "rate_limit_exceeded"})
	}
}

func (s *sim) kubeletToggle(r *rand.Rand, down bool) {
	n, ok := pick(r, s.nodes())
	if !ok || s.kubeletDown[n.Name] == down {
		return
	}
	s.trace("node %s: kubelet %s", n.Name, map[bool]string{true: "stops", false: "back"}[down])
	if down {
		s.kubeletDown[n.Name] = true
	} else {
		delete(s.kubeletDown, n.Name)
	}
}

// personCordons cordons a node, or uncordons one the person cordoned.
func (s *sim) personCordons(r *rand.Rand) {
	n, ok := pick(r, s.nodes())
	if !ok {
		return
	}
	cordon := !s.personCordon[n.Name]
	if !cordon {
		delete(s.personCordon, n.Name)
		s.must(nodedrain.Uncordon(context.Background(), s.kube, n.Name))
	} else if !n.Spec.Unschedulable {
		s.personCordon[n.Name] = true
		s.must(nodedrain.Cordon(context.Background(), s.kube, n.Name))
	}
	s.trace("person: cordon %s = %v", n.Name, cordon)
}

func (s *sim) soloPod(_ *rand.Rand) {
	p := s.pod(fmt.Sprintf("solo-%d", s.uid+1), "")
	s.must(s.kube.Tracker().Add(p))
	s.trace("pod %s without a controller created", p.Name)
}

// doNotDisrupt toggles the do-not-disrupt annotation of a pod.
func (s *sim) doNotDisrupt(r *rand.Rand) {
	var movable []*corev1.Pod
	for _, p := range s.pods() {
		if p.Labels["app"] != "" || p.OwnerReferences == nil {
			movable = append(movable, p)
		}
	}
	p, ok := pick(r, movable)
	if !ok {
		return
	}
	on := p.Annotations[nodedrain.DoNotDisruptAnnotation] != "true"
	v := any(nil)
	if on {
		v = "true"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{nodedrain.DoNotDisruptAnnotation: v}}})
	_, err := s.kube.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	s.must(err)
	s.trace("pod %s: do-not-disrupt = %v", p.Name, on)
}

// budget changes web's PodDisruptionBudget: from allowing all to none.
func (s *sim) budget(r *rand.Rand) {
	min := r.IntN(simApps[0].replicas + 1)
	b := s.budgets()[0].DeepCopy()
	b.Spec.MinAvailable.IntVal = int32(min)
	b.Generation++
	s.must(s.kube.Tracker().Update(pdbsGVR, b, b.Namespace))
	s.trace("budget web: minAvailable %d", min)
}

func (s *sim) reload() {
	s.trace("reload: %+v", s.cfg)
	if err := s.live.cluster.Reconfigure(context.Background(), s.load(s.cfg)); err != nil {
		s.trace("reload refused: %v", err)
	}
}

// restart ends the replica as a process exit would and starts a new one
// on the same APIs.
func (s *sim) restart() {
	s.trace("replica restarts")
	s.live.close()
	s.live = s.newReplica()
}

// handOver makes another replica the leader. The old one is told it no
// longer leads, but acts on what it started until it notices, one step
// interval later.
func (s *sim) handOver() {
	s.trace("Lease handed over to a new replica")
	s.live.leads.Store(false)
	s.live.retire = time.Now().Add(15 * time.Second)
	s.old = append(s.old, s.live)
	s.live = s.newReplica()
}

// retireOld closes the replicas that lost the Lease once they noticed.
func (s *sim) retireOld(all bool) {
	kept := s.old[:0]
	for _, r := range s.old {
		if all || !time.Now().Before(r.retire) {
			_, _ = r.ctrl.Step(context.Background()) // it no longer leads: stops its drains
			r.close()
			continue
		}
		kept = append(kept, r)
	}
	s.old = kept
}

// undoPeople lifts what people and pods hold: cordons, do-not-disrupt,
// a budget that allows nothing, and the pods without a controller (their
// owners move them by hand).
func (s *sim) undoPeople() {
	ctx := context.Background()
	for name := range s.personCordon {
		if s.node(name) != nil {
			s.must(nodedrain.Uncordon(ctx, s.kube, name))
		}
	}
	clear(s.personCordon)
	for _, p := range s.pods() {
		if p.OwnerReferences == nil {
			s.must(s.kube.Tracker().Delete(podsGVR, p.Namespace, p.Name))
		} else if p.Annotations[nodedrain.DoNotDisruptAnnotation] == "true" {
			p = p.DeepCopy()
			delete(p.Annotations, nodedrain.DoNotDisruptAnnotation)
			s.must(s.kube.Tracker().Update(podsGVR, p, p.Namespace))
		}
	}
	b := s.budgets()[0].DeepCopy()
	b.Spec.MinAvailable.IntVal = 2
	b.Generation++
	s.must(s.kube.Tracker().Update(pdbsGVR, b, b.Namespace))
}
