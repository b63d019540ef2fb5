package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/nodedrain"
	"github.com/hcloudscale/hcloudscale/pool"
)

// What RollBack did with one replacement or mark (Undone.Action).
const (
	// UndoneFinished: the old node was drained already and its
	// replacement is Ready: the old server was deleted, as the
	// replacement would have ended.
	UndoneFinished = "finished"
	// UndoneRolledBack: the old node serves again (uncordoned where the
	// lifecycle cordoned it, its marks removed) and the replacement,
	// holding nothing but DaemonSet pods or not joined, was deleted.
	UndoneRolledBack = "rolled_back"
	// UndoneKept: rolled back as above, but the replacement holds pods
	// now and was kept, its scale-down protection lifted: the pool stays
	// one node larger until the autoscaler removes an unneeded node.
	UndoneKept = "rolled_back_replacement_kept"
	// UndoneUnprotected: a replacement whose old server is gone lost its
	// scale-down protection.
	UndoneUnprotected = "unprotected"
	// UndoneCleared: a mark or stop annotation without a replacement
	// behind it was removed (and its node uncordoned where the lifecycle
	// cordoned it).
	UndoneCleared = "cleared"
)

// Undone is one thing RollBack finished or rolled back.
type Undone struct {
	Pool        string `json:"pool"`
	Node        string `json:"node"`
	Replacement string `json:"replacement,omitempty"`
	Action      string `json:"action"`
	// Error is set when a write failed; the state is left for the next
	// RollBack.
	Error string `json:"error,omitempty"`
}

// RollBack ends every replacement the lifecycle left, for a cluster that
// runs without it (the lifecycle turned off, or removed): a replacement
// whose old node was drained and whose replacement is Ready, not being
// deleted, is finished (the old server deleted); every other one is
// rolled back: the old node uncordoned where the lifecycle cordoned it,
// the lifecycle's annotations removed from every node, and the
// replacement deleted when it holds nothing but DaemonSet and mirror pods
// (else kept, unprotected). A live old node is never deleted unless its
// replacement is Ready. It acts only while WithLeader says the process
// leads; call it instead of Run, not beside it. RollBack is idempotent:
// what a failed write left is found again by the next call.
func (c *Controller) RollBack(ctx context.Context) ([]Undone, error) {
	if !c.o.leads() {
		return nil, nil
	}
	if left, err := c.leftover(ctx); err != nil || !left {
		return nil, err
	}
	w, err := c.observe(ctx)
	if err != nil {
		return nil, err
	}
	inv := w.index()
	var out []Undone
	for _, r := range inv.done {
		if u, ok := c.unprotectDone(ctx, r); ok {
			out = append(out, u)
		}
	}
	handled := map[string]bool{}
	for _, r := range sortedReplacements(inv.byOld) {
		if r.oldGoing {
			// The old server is being deleted: its node stays as it is
			// (uncordoned, it would take pods), the replacement stays.
			handled[r.old.Name] = true
			if u, ok := c.unprotectDone(ctx, r); ok {
				out = append(out, u)
			}
			continue
		}
		out = append(out, c.rollBackOne(ctx, w, r))
	}
	for _, u := range out {
		handled[u.Node] = true
	}
	for _, n := range w.byName {
		if handled[n.Name] {
			continue
		}
		if u, ok := c.clearMarks(ctx, w, n); ok {
			out = append(out, u)
		}
	}
	var errs []error
	for _, u := range out {
		if u.Error != "" {
			errs = append(errs, fmt.Errorf("node %s: %s", u.Node, u.Error))
		}
	}
	return out, errors.Join(errs...)
}

func (c *Controller) unprotectDone(ctx context.Context, r *replacement) (Undone, bool) {
	n := r.newNode
	if n == nil {
		return Undone{}, false
	}
	if _, ok := n.Annotations[ProtectsAnnotation]; !ok {
		return Undone{}, false
	}
	u := Undone{Pool: r.newPool.name, Node: n.Name, Replacement: r.newName, Action: UndoneUnprotected}
	if err := c.annotate(ctx, n.Name, map[string]*string{ScaleDownDisabledAnnotation: nil, ProtectsAnnotation: nil}); err != nil {
		u.Error = err.Error()
	}
	return u, true
}

// rollBackOne finishes or rolls back one replacement in progress.
func (c *Controller) rollBackOne(ctx context.Context, w *world, r *replacement) Undone {
	u := Undone{Pool: r.pool.name, Node: r.old.Name, Replacement: r.newName, Action: UndoneRolledBack}
	if c.mayDelete(r.pool.name) && c.canFinish(ctx, w, r) {
		u.Action = UndoneFinished
		if err := c.poolNamed(r.pool.name).DeleteInstances(ctx, []string{r.old.ProviderID()}); err != nil {
			u.Error = err.Error()
			return u
		}
		c.o.log.Info("lifecycle off: replacement finished, old server deleted", zap.String("node", r.old.Name), zap.String("replacement", r.newName))
		return u
	}
	if r.oldNode != nil {
		if err := c.uncordonMarked(ctx, r.oldNode); err != nil {
			u.Error = err.Error()
			return u
		}
	}
	var tombstone *string
	if r.newName != "" {
		u.Action = c.dropReplacement(ctx, r, &u)
		if u.Action == UndoneKept {
			// The kept server still carries the label naming the old one:
			// the stop tells a lifecycle turned on again that it ended.
			v := encode(Stop{At: c.o.clock.Now(), Replacement: r.newName, Reason: "rolled back while the lifecycle was off; the replacement holds pods and was kept"})
			tombstone = &v
		}
	}
	if r.oldNode != nil {
		if err := c.annotate(ctx, r.oldNode.Name, map[string]*string{ReplacementAnnotation: nil, StoppedAnnotation: tombstone}); err != nil && u.Error == "" {
			u.Error = err.Error()
		}
	}
	c.o.log.Info("lifecycle off: replacement rolled back", zap.String("node", r.old.Name), zap.String("replacement", r.newName), zap.String("action", u.Action))
	return u
}

// canFinish reports whether r's old node may go now: drained (or, for a
// repair, still not Ready), its replacement Ready and not being deleted.
func (c *Controller) canFinish(ctx context.Context, w *world, r *replacement) bool {
	if r.newName == "" || !r.hasMark || r.mark.Replacement != r.newName || r.mark.Phase != PhaseDeleting {
		return false
	}
	if !ready(r.newNode) || replacementDeleting(w, r) || c.poolNamed(r.pool.name) == nil {
		return false
	}
	if r.oldNode == nil {
		return true
	}
	if r.mark.Repair {
		_, down := notReadySince(r.oldNode)
		return down
	}
	left, err := nodedrain.PodsToMove(ctx, c.client, r.oldNode.Name)
	return err == nil && len(left) == 0
}

// replacementDeleting reports whether r's replacement is being deleted,
// or gone.
func replacementDeleting(w *world, r *replacement) bool {
	for _, in := range r.newPool.instances {
		if in.Name == r.newName {
			return in.State == pool.Deleting
		}
	}
	return true
}

// mayDelete reports whether RollBack may delete servers of the pool
// (WithRollBackDeletes).
func (c *Controller) mayDelete(pool string) bool { return c.o.deletes == nil || c.o.deletes(pool) }

// uncordonMarked uncordons a node the lifecycle cordoned: its mark is
// past surging.
func (c *Controller) uncordonMarked(ctx context.Context, n *corev1.Node) error {
	if m, ok := markOf(n); ok && m.Phase != PhaseSurging && n.Spec.Unschedulable {
		return nodedrain.Uncordon(ctx, c.client, n.Name)
	}
	return nil
}

// dropReplacement deletes r's replacement when, cordoned, it holds
// nothing a drain would move, else (and outside WithRollBackDeletes) lifts its protection
// and keeps it.
func (c *Controller) dropReplacement(ctx context.Context, r *replacement, u *Undone) string {
	p := c.poolNamed(r.newPool.name)
	keep := !c.mayDelete(r.newPool.name)
	if r.newNode != nil && !keep {
		keep = p == nil
		if p != nil {
			// Cordoned while idle: no pod lands on it before the delete.
			left, err := c.cordonIdle(ctx, r.newNode.Name)
			if err != nil {
				u.Error = err.Error()
			}
			keep = err != nil || left > 0
		}
	}
	if keep {
		if r.newNode != nil {
			if err := c.annotate(ctx, r.newNode.Name, map[string]*string{ScaleDownDisabledAnnotation: nil, ProtectsAnnotation: nil}); err != nil && u.Error == "" {
				u.Error = err.Error()
			}
		}
		return UndoneKept
	}
	if p == nil {
		return UndoneRolledBack
	}
	id := pool.ClaimID(r.newPool.name, r.newName)
	if r.newID != 0 {
		id = fmt.Sprintf("hcloud://%d", r.newID)
	}
	if err := p.ForceDeleteInstances(ctx, []string{id}); err != nil {
		u.Error = err.Error()
	}
	return UndoneRolledBack
}

// clearMarks removes what is left of the lifecycle on a node no
// replacement in progress owns: a mark whose replacement is gone (the node
// uncordoned where the lifecycle cordoned it), a stop, except one that
// names a replacement server still there (it tells a lifecycle turned on
// again that the replacement ended).
func (c *Controller) clearMarks(ctx context.Context, w *world, n *corev1.Node) (Undone, bool) {
	if _, marked := n.Annotations[ReplacementAnnotation]; !marked && !c.staleStop(w, n) {
		return Undone{}, false
	}
	// RollBack read the nodes before it acted on the replacements.
	cur, err := c.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return Undone{}, false
	}
	_, marked := cur.Annotations[ReplacementAnnotation]
	stale := c.staleStop(w, cur)
	if !marked && !stale {
		return Undone{}, false
	}
	u := Undone{Node: n.Name, Action: UndoneCleared}
	if pv := w.poolOfServer(w.serverOfNode(n)); pv != nil {
		u.Pool = pv.name
	}
	set := map[string]*string{ReplacementAnnotation: nil}
	if stale {
		set[StoppedAnnotation] = nil
	}
	if err := c.uncordonMarked(ctx, cur); err != nil {
		u.Error = err.Error()
	} else if err := c.annotate(ctx, n.Name, set); err != nil {
		u.Error = err.Error()
	}
	return u, true
}

// staleStop reports whether n carries a stop whose replacement server is
// gone.
func (c *Controller) staleStop(w *world, n *corev1.Node) bool {
	st, ok := stopOf(n)
	if !ok {
		_, present := n.Annotations[StoppedAnnotation]
		return present // unreadable: ours, and of no use
	}
	for i := range w.pools {
		for _, in := range w.pools[i].instances {
			if in.Name == st.Replacement && in.State != pool.Deleting {
				return false
			}
		}
	}
	return true
}

// leftover reports, from memory and one node listing, whether anything of
// the lifecycle is left: a replacement server or claim, or a node with
// one of its annotations. It spares a cluster that never ran the
// lifecycle the lookups a plan makes.
func (c *Controller) leftover(ctx context.Context) (bool, error) {
	for _, p := range c.cluster.Pools() {
		for _, in := range p.Instances() {
			if in.Replaces > 0 {
				return true, nil
			}
		}
	}
	nodes, err := c.listNodes(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		for _, a := range []string{ReplacementAnnotation, StoppedAnnotation, ProtectsAnnotation} {
			if _, ok := n.Annotations[a]; ok {
				return true, nil
			}
		}
	}
	return false, nil
}
