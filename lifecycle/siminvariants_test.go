package lifecycle_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/pool"
)

// The invariants, by the name a violation carries.
const (
	invEvictReplacement = "evict-replacement"   // evicted while the replacement is gone, deleting or not Ready
	invEvictUnmarked    = "evict-unmarked"      // evicted from a node the lifecycle did not take out
	invEvictOrphan      = "evict-no-controller" // a pod nothing recreates evicted
	invDeleteLive       = "delete-live"         // a live node's server deleted without its replacement Ready
	invDeleteUndrained  = "delete-undrained"    // a server deleted with pods left to move
	invRepairReady      = "repair-ready"        // a repair deleted a node that is Ready
	invMaxServers       = "max-servers"         // more than max + maxSurge servers in a pool
	invInFlight         = "in-flight"           // more replacements than maxInFlight
	invQuiescent        = "quiescent"           // after the run: a trace left, a pool off its size, a leak
)

// openInvariants are invariants the code does not hold yet: their
// violations are logged, not failed, unless -sim.strict. Each entry says
// why; delete it once the code holds the invariant.
var openInvariants = map[string]string{}

// replacementState says why the replacement named in a mark cannot stand
// for its old node now; "" when it can (exists, not deleting, Ready).
func (s *sim) replacementState(name string) string {
	if name == "" {
		return "no replacement"
	}
	sv, ok := s.serverNamed(name)
	switch {
	case !ok:
		return "replacement " + name + " is gone"
	case sv.Status == "deleting":
		return "replacement " + name + " is being deleted"
	case !nodeReady(s.node(name)) || s.node(name).Spec.Unschedulable:
		return "replacement " + name + " is not Ready"
	}
	return ""
}

// removedPool reports whether the configuration no longer has pool.
func (s *sim) removedPool(pool string) bool { return pool == "batch" && s.cfg.batchRemoved }

// evictsUnreplicated reports whether the policy of node's pool lets a
// drain evict pods without a controller: only batch's evictUnreplicatedPods
// is set; a removed pool drains under the cluster's, which is not.
func (s *sim) evictsUnreplicated(node string) bool {
	sv, ok := s.serverNamed(node)
	return ok && poolOf(sv.Labels) == "batch" && !s.removedPool("batch")
}

// checkEviction checks an eviction the lifecycle asks for, as it asks.
func (s *sim) checkEviction(p *corev1.Pod) {
	n := s.node(p.Spec.NodeName)
	if n == nil {
		return
	}
	if metav1.GetControllerOf(p) == nil && !s.evictsUnreplicated(n.Name) {
		s.violate(invEvictOrphan, "pod %s without a controller evicted from %s; its pool does not allow it", p.Name, n.Name)
	}
	m, ok := markOf(n)
	if !ok {
		s.violate(invEvictUnmarked, "pod %s evicted from %s, which carries no replacement mark", p.Name, n.Name)
		return
	}
	if m.Replacement == "" {
		if sv, ok := s.serverNamed(n.Name); ok && !s.removedPool(poolOf(sv.Labels)) {
			s.violate(invEvictUnmarked, "pod %s evicted from %s, drained out without a replacement, but its pool is configured", p.Name, n.Name)
		}
		return
	}
	if why := s.replacementState(m.Replacement); why != "" {
		s.violate(invEvictReplacement, "pod %s evicted from %s: %s", p.Name, n.Name, why)
	}
}

// checkServerDelete checks a delete the lifecycle (or a pool's own
// clean-up) sends, as it sends it: a live node goes only once drained
// and its replacement stands; a repair only while the node is not Ready;
// a replacement only while it holds nothing but DaemonSet pods.
func (s *sim) checkServerDelete(path string) {
	id, err := strconv.ParseInt(path[strings.LastIndex(path, "/")+1:], 10, 64)
	if err != nil {
		return
	}
	sv, ok := s.api.ServerByID(id)
	n := s.node(sv.Name)
	if !ok || n == nil || sv.Status == "deleting" || s.caDeleted[sv.Name] {
		return // never joined, gone already, or the autoscaler's decision
	}
	left := s.podsToMove(n.Name)
	m, marked := markOf(n)
	switch {
	case sv.Labels[config.LabelReplaces] != "" && !marked:
		if len(left) > 0 && nodeReady(n) {
			s.violate(invDeleteLive, "replacement %s deleted while it runs %v", sv.Name, left)
		}
	case !marked:
		if nodeReady(n) {
			s.violate(invDeleteLive, "server %s deleted; its node is Ready and carries no replacement mark", sv.Name)
		}
	case m.Repair && nodeReady(n):
		s.violate(invRepairReady, "server %s deleted as a repair while its node is Ready", sv.Name)
	case m.Replacement == "" && !s.removedPool(poolOf(sv.Labels)):
		s.violate(invDeleteLive, "server %s deleted without a replacement, but its pool is configured", sv.Name)
	default:
		if why := s.replacementState(m.Replacement); m.Replacement != "" && why != "" {
			s.violate(invDeleteLive, "server %s deleted: %s", sv.Name, why)
		}
		if !m.Repair && len(left) > 0 {
			s.violate(invDeleteUndrained, "server %s deleted with pods left to move: %v", sv.Name, left)
		}
	}
}

// podsToMove names the pods on node a drain must move.
func (s *sim) podsToMove(node string) []string {
	var out []string
	for _, p := range s.pods() {
		if p.Spec.NodeName == node && movable(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// checkState checks what must hold at every instant: the servers of each
// pool within max + maxSurge (a lowered max counts from when the pool
// first fits it), and the replacements in progress within maxInFlight.
func (s *sim) checkState() {
	servers := s.servers()
	count := map[string]int{}
	byID := map[int64]hcloudtest.ServerInfo{}
	for _, sv := range servers {
		byID[sv.ID] = sv
		if sv.Status != "deleting" {
			count[poolOf(sv.Labels)]++
		}
	}
	for _, sv := range servers {
		id, _ := strconv.ParseInt(sv.Labels[config.LabelReplaces], 10, 64)
		if old, ok := byID[id]; ok && old.ServerType+old.Location != sv.ServerType+sv.Location {
			s.moves[sv.Name] = true
		}
	}
	for pool, max := range map[string]int{"workers": s.cfg.workersMax, "batch": 3} {
		if s.removedPool(pool) {
			continue
		}
		if count[pool] <= max+1 {
			s.allowance[pool] = max
		}
		if count[pool] > s.allowance[pool]+1 {
			s.violate(invMaxServers, "pool %s has %d servers; max %d + maxSurge 1", pool, count[pool], s.allowance[pool])
		}
	}
	total := 0
	for pool, n := range s.inFlight(servers) {
		total += n
		if n > 1 && !s.removedPool(pool) {
			s.violate(invInFlight, "pool %s has %d replacements in progress; maxInFlight 1", pool, n)
		}
	}
	if total > simClusterInFlight {
		s.violate(invInFlight, "%d replacements in progress; the cluster's maxInFlight %d", total, simClusterInFlight)
	}
}

// inFlight counts the replacements in progress by pool: the old servers
// that still run and have a node marked for replacement, or a replacement
// server that the old node's Stop does not name.
func (s *sim) inFlight(servers []hcloudtest.ServerInfo) map[string]int {
	out := map[string]int{}
	byID := map[int64]hcloudtest.ServerInfo{}
	for _, sv := range servers {
		byID[sv.ID] = sv
	}
	busy := map[int64]bool{}
	for _, sv := range servers {
		if sv.Status == "deleting" {
			continue
		}
		if n := s.node(sv.Name); n != nil {
			if _, ok := markOf(n); ok {
				busy[sv.ID] = true
			}
		}
		id, _ := strconv.ParseInt(sv.Labels[config.LabelReplaces], 10, 64)
		old, ok := byID[id]
		if !ok || old.Status == "deleting" {
			continue
		}
		if n := s.node(old.Name); n == nil || !strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], `"`+sv.Name+`"`) {
			busy[id] = true
		}
	}
	for id := range busy {
		out[poolOf(byID[id].Labels)]++
	}
	return out
}

// checkQuiescent checks a world at rest: no node the lifecycle cordoned,
// marked or protected; every pool at its target with no replacement left
// over; every server running, in a pool's instances, with a Ready node.
func (s *sim) checkQuiescent() {
	s.must(s.live.cluster.RefreshNow(context.Background()))
	if p, err := s.live.ctrl.Plan(context.Background()); err == nil {
		s.trace("plan at rest: %+v", p.Steps)
	}
	for _, n := range s.nodes() {
		if s.quiescentNode(n) != "" {
			s.violate(invQuiescent, "%s", s.quiescentNode(n))
		}
	}
	servers := s.servers()
	known := map[int64]bool{}
	for _, p := range s.live.cluster.Pools() {
		for _, in := range p.Instances() {
			known[in.ServerID] = true
		}
		n := 0
		for _, sv := range servers {
			// The node group: one per offering of a pool.
			if s.live.cluster.PoolForNode(fmt.Sprintf("hcloud://%d", sv.ID), sv.Name) == p {
				n++
			}
		}
		if n != p.TargetSize() {
			s.violate(invQuiescent, "pool %s has %d servers; its target is %d; its instances %+v", p.Name(), n, p.TargetSize(), p.Instances())
		}
	}
	for _, sv := range servers {
		if why := s.quiescentServer(sv, known[sv.ID]); why != "" {
			s.violate(invQuiescent, "server %s: %s", sv.Name, why)
		}
	}
}

func (s *sim) quiescentNode(n *corev1.Node) string {
	for _, a := range []string{lifecycle.ReplacementAnnotation, lifecycle.ProtectsAnnotation, lifecycle.ScaleDownDisabledAnnotation} {
		if _, ok := n.Annotations[a]; ok {
			return fmt.Sprintf("node %s keeps %s", n.Name, a)
		}
	}
	if n.Spec.Unschedulable {
		return fmt.Sprintf("node %s left cordoned", n.Name)
	}
	return ""
}

func (s *sim) quiescentServer(sv hcloudtest.ServerInfo, known bool) string {
	switch {
	case !known:
		return "leaked: no pool counts it"
	case sv.Status != hcloud.ServerStatusRunning:
		return "status " + string(sv.Status)
	case !nodeReady(s.node(sv.Name)):
		return "no Ready node"
	}
	id, _ := strconv.ParseInt(sv.Labels[config.LabelReplaces], 10, 64)
	old, there := s.api.ServerByID(id)
	if !there || id == 0 {
		return ""
	}
	// A stopped drain keeps a replacement that holds pods as an ordinary
	// node; the old node's stop names it.
	if n := s.node(old.Name); n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], `"`+sv.Name+`"`) {
		return ""
	}
	return fmt.Sprintf("a replacement left over: the server %d it replaces is still there, and its stop does not name it", id)
}

// stable reports whether the world is at rest: nothing the lifecycle or
// the autoscaler still has to do.
func (s *sim) stable() bool {
	if err := s.live.cluster.RefreshNow(context.Background()); err != nil {
		return false
	}
	for _, n := range s.nodes() {
		if s.quiescentNode(n) != "" {
			return false
		}
	}
	p, err := s.live.ctrl.Plan(context.Background())
	if err != nil || len(p.Steps) > 0 {
		return false // every blocker is lifted: what is due will start
	}
	for _, sv := range s.servers() {
		if sv.Status != hcloud.ServerStatusRunning || !nodeReady(s.node(sv.Name)) {
			return false
		}
	}
	for _, pl := range s.live.cluster.Pools() {
		for _, in := range pl.Instances() {
			if in.State != pool.Running {
				return false
			}
		}
	}
	return true
}
