package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/nodedrain"
	"github.com/hcloudscale/hcloudscale/pool"
)

// DefaultInterval is the time between two steps of Run.
const DefaultInterval = 15 * time.Second

// Controller replaces the nodes of a Cluster's pools that are due; see the
// package documentation. Its methods are safe for concurrent use, but
// only one process may run it against a cluster at a time: give it
// WithLeader under leader election.
type Controller struct {
	cluster *hcloudscale.Cluster
	client  kubernetes.Interface
	o       options
	m       *metrics

	mu     sync.Mutex
	drains map[int64]*drainRun  // by old server ID
	seen   map[string]time.Time // first sight of a replacement, by name
	// deleted holds the old servers whose delete was accepted.
	deleted map[int64]bool
	// notStarted holds, by node, the cause of the last
	// ReplacementNotStarted Event: it is recorded once per cause.
	notStarted map[string]string
	// nodeLister is Run's informer's, once synced; nil: list from the API.
	nodeLister corelisters.NodeLister
	// watching holds the old servers whose delete a goroutine waits for,
	// to wake Run when it ends.
	watching map[int64]bool
	// wake makes Run step now: something a replacement waits for
	// happened (a node turned Ready or went, a drain or a delete ended).
	wake   chan struct{}
	wg     sync.WaitGroup
	ctx    context.Context // ends at Close; drains run under it
	cancel context.CancelFunc
}

// New returns a Controller for cluster that reads and changes nodes and
// pods through client. It does no I/O.
func New(cluster *hcloudscale.Cluster, client kubernetes.Interface, opts ...Option) (*Controller, error) {
	if cluster == nil || client == nil {
		return nil, errors.New("lifecycle: a Cluster and a Kubernetes client are required")
	}
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Controller{cluster: cluster, client: client, o: o, m: m,
		drains: map[int64]*drainRun{}, seen: map[string]time.Time{}, deleted: map[int64]bool{}, notStarted: map[string]string{},
		watching: map[int64]bool{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}, nil
}

// Close stops the drains in progress and the watches of old servers'
// deletes, and waits for them; a step that runs meanwhile starts none.
// Their nodes stay cordoned and marked: the next Controller (after a
// restart, or on the new leader) carries them on.
func (c *Controller) Close() {
	c.mu.Lock()
	c.cancel() // under mu: a goroutine is either counted in wg or not started
	c.mu.Unlock()
	c.wg.Wait()
}

// goLocked runs f in a goroutine that Close waits for, unless Close has
// begun; it reports whether f runs. The caller holds c.mu: the check and
// wg's count are one step against Close, so no goroutine starts once
// Close waits (an Add then could race its Wait, or outlive it).
func (c *Controller) goLocked(f func()) bool {
	if c.ctx.Err() != nil {
		return false
	}
	c.wg.Go(f)
	return true
}

// Run makes a Step when something a replacement waits for happens (a
// node registers, turns Ready or goes; a drain ends; an old server's
// delete ends; a configuration is applied) and every interval in any case, until ctx ends. While
// WithLeader says the process does not lead, it makes no step and stops
// its drains.
func (c *Controller) Run(ctx context.Context) error {
	c.startInformer(ctx)
	t := c.o.clock.NewTicker(c.o.interval)
	defer t.Stop()
	for {
		changed := c.cluster.ConfigChanged()
		if _, err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.o.log.Warn("node lifecycle step failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-c.wake:
		case <-changed:
		}
	}
}

// kick makes Run step as soon as it can; kicks while a step runs make
// one more step.
func (c *Controller) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// watchDelete wakes Run once the delete of the old server with ID id,
// which p accepted, has ended: the server is gone, or listed again after
// a failed delete. It looks at p's memory (no request) every deletePoll.
// The goroutine ends with the delete, or at Close.
func (c *Controller) watchDelete(p *pool.Pool, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching[id] {
		return
	}
	c.watching[id] = true // the goroutine's end takes mu: after this
	if !c.goLocked(func() {
		defer func() {
			c.mu.Lock()
			delete(c.watching, id)
			c.mu.Unlock()
			c.kick()
		}()
		// A poll of memory, on the real clock: WithClock's may stand still.
		t := time.NewTicker(deletePoll)
		defer t.Stop()
		for deleting(p, id) {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
		}
	}) {
		delete(c.watching, id)
	}
}

// deletePoll is how often watchDelete looks at a pool's memory.
const deletePoll = 100 * time.Millisecond

// deleting reports whether p lists the server with ID id as being deleted.
func deleting(p *pool.Pool, id int64) bool {
	for _, in := range p.Instances() {
		if in.ServerID == id {
			return in.State == pool.Deleting
		}
	}
	return false
}

// Plan reads the cluster's state and returns what a Step would do now,
// changing nothing. It makes no Hetzner request beyond what the Cluster's
// caches need (a listing when its TTL passed, an image lookup when its
// cache expired); in Kubernetes it lists the nodes, and the pods and
// budgets of each node it would start with.
func (c *Controller) Plan(ctx context.Context) (*Plan, error) {
	w, err := c.observe(ctx)
	if err != nil {
		return nil, err
	}
	return c.planChecked(ctx, w, w.index()), nil
}

// Step reads the cluster's state, carries every replacement in progress
// one phase further where it can and starts the replacements the budgets
// and windows allow. With WithDryRun it only plans. It returns the plan it
// acted on; nil when it does not lead.
func (c *Controller) Step(ctx context.Context) (*Plan, error) {
	lead := c.o.lead()
	if !c.o.leads() || lead == nil || lead.Err() != nil {
		c.stopDrains()
		return nil, nil
	}
	// Every write of this step ends the moment leadership does.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(lead, cancel)()
	w, err := c.observe(ctx)
	if err != nil {
		return nil, err
	}
	w.lead = lead
	inv := w.index()
	p := c.planChecked(ctx, w, inv)
	c.m.observe(p, w)
	if c.o.dryRun {
		c.logPlan(p)
		return p, nil
	}
	c.prune(inv, p)
	for _, r := range inv.done {
		c.unprotect(ctx, r.newNode)
	}
	for _, n := range inv.orphans {
		c.orphan(ctx, w, n)
	}
	for _, r := range sortedReplacements(inv.byOld) {
		c.advance(ctx, w, r)
	}
	for i := range p.Steps {
		if p.Steps[i].State == StateStart {
			c.start(ctx, w, &p.Steps[i])
		}
	}
	return p, nil
}

// planChecked plans w and checks the pods of each node that would start:
// a node that a pod would hold (marked not to be disrupted, or under a
// PodDisruptionBudget that allows no disruption now) is blocked and holds
// no budget, so the plan is made again without it until every start is
// clear. A repair has no drain: its node is not Ready, and its pods
// cannot stop there.
func (c *Controller) planChecked(ctx context.Context, w *world, inv *inventory) *Plan {
	w.podBlocks = map[int64][]string{}
	checked := map[int64]bool{}
	for {
		p := w.plan(inv)
		again := false
		for i := range p.Steps {
			st := &p.Steps[i]
			if st.State != StateStart || checked[st.ServerID] || slices.Contains(st.Reasons, ReasonNotReady) {
				continue
			}
			checked[st.ServerID] = true
			var held []string
			blockers, err := nodedrain.Blockers(ctx, c.client, st.Node, w.policy(w.poolView(st.Pool)))
			if err != nil {
				held = append(held, "its pods could not be checked: "+err.Error())
			}
			for _, b := range blockers {
				held = append(held, blockedBy(b))
			}
			if len(held) > 0 {
				w.podBlocks[st.ServerID], again = held, true
			}
		}
		if !again {
			return p
		}
	}
}

func (c *Controller) logPlan(p *Plan) {
	for _, st := range p.Steps {
		switch st.State {
		case StateStart:
			c.o.log.Info("dry run: would replace node", zap.String("pool", st.Pool), zap.String("node", st.Node), zap.Strings("reasons", st.Reasons), zap.Bool("surge", st.Surge))
		case StateBlocked:
			c.o.log.Debug("node due, blocked", zap.String("pool", st.Pool), zap.String("node", st.Node), zap.Strings("reasons", st.Reasons), zap.Strings("blocked", st.Blocked))
		}
	}
}

// poolNamed returns the pool of that name, configured or removed.
func (c *Controller) poolNamed(name string) *pool.Pool {
	for _, p := range c.cluster.Pools() {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// start begins the replacement of a due node: a surge claim in its pool,
// or for a node of a removed pool, its drain.
func (c *Controller) start(ctx context.Context, w *world, st *Step) {
	p := c.poolNamed(st.Pool)
	node := w.byName[st.Node]
	if p == nil || node == nil {
		return
	}
	log := c.o.log.With(zap.String("pool", st.Pool), zap.String("node", st.Node), zap.Strings("reasons", st.Reasons))
	pv := w.poolView(st.Pool)
	if pv == nil {
		return
	}
	if pv.removed {
		mark := Mark{Phase: PhaseDraining, Since: c.o.clock.Now()}
		if err := c.cordonMarked(ctx, node, mark); err != nil {
			log.Warn("could not start draining out a node of a removed pool", zap.Error(err))
			return
		}
		log.Info("draining out a node of a removed pool")
		c.event(node, corev1.EventTypeNormal, "DrainOutStarted", "draining out the node of removed pool %s", st.Pool)
		c.m.result(st.Pool, "started")
		c.drain(w, &replacement{pool: w.poolView(st.Pool), old: *w.serverByID(st.ServerID), mark: mark, hasMark: true, phase: PhaseDraining, oldNode: node}, st.Pool)
		return
	}
	if _, stopped := node.Annotations[StoppedAnnotation]; stopped {
		if err := c.annotate(ctx, node.Name, map[string]*string{StoppedAnnotation: nil}); err != nil {
			log.Warn("could not clear the last stop before a retry", zap.Error(err))
			return
		}
	}
	into := p
	if st.Into != "" {
		// Another offering of the node's pool: the old server stays in
		// its own group until its delete.
		if into = c.poolNamed(st.Into); into == nil {
			return
		}
	}
	name, err := into.Surge(ctx, st.ServerID, w.settings(w.poolView(st.Pool)).MaxSurge)
	if err != nil {
		log.Warn("could not create the replacement", zap.Error(err))
		if c.newCause(node.Name, err) {
			c.event(node, corev1.EventTypeWarning, "ReplacementNotStarted", "could not create a replacement: %v", err)
		}
		return
	}
	mark := encode(Mark{Replacement: name, Phase: PhaseSurging, Since: c.o.clock.Now()})
	if err := c.annotate(ctx, node.Name, map[string]*string{ReplacementAnnotation: &mark}); err != nil {
		log.Warn("could not mark the node", zap.Error(err))
	}
	log.Info("replacement started", zap.String("replacement", name), zap.String("into", into.Name()), zap.Bool("surge", st.Surge))
	c.event(node, corev1.EventTypeNormal, "ReplacementStarted", "replacing the node (%v) with %s", st.Reasons, name)
	c.m.result(st.Pool, "started")
}

// newCause reports whether err is another cause than the last one a
// replacement of node could not start for, and remembers it.
func (c *Controller) newCause(node string, err error) bool {
	cause := err.Error()
	for _, known := range []error{pool.ErrAboveMax, pool.ErrRemoved, pool.ErrOfferingUnavailable, pool.ErrClosed, pool.ErrFenced} {
		if errors.Is(err, known) {
			cause = known.Error() // the same cause, whatever the counts
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.notStarted[node] == cause {
		return false
	}
	c.notStarted[node] = cause
	return true
}

// prune forgets what the Controller remembers of replacements and nodes
// that are no longer there or no longer due.
func (c *Controller) prune(inv *inventory, p *Plan) {
	names, due := map[string]bool{}, map[string]bool{}
	for _, r := range inv.byOld {
		names[r.newName] = true
	}
	for _, st := range p.Steps {
		due[st.Node] = st.State != StateInProgress
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.seen {
		if !names[name] {
			delete(c.seen, name)
		}
	}
	for id := range c.deleted {
		if _, listed := inv.servers[id]; !listed && inv.going[id].pool == nil {
			delete(c.deleted, id)
		}
	}
	for node := range c.notStarted {
		if !due[node] {
			delete(c.notStarted, node)
		}
	}
}

// advance carries one replacement in progress on.
func (c *Controller) advance(ctx context.Context, w *world, r *replacement) {
	switch {
	case r.oldGoing:
		// The old server's delete has not ended: wait for it.
	case r.failed != nil:
		c.discard(ctx, r, fmt.Sprintf("the replacement %s failed to be created: %s", r.newName, r.failed.Message))
	case r.phase == PhaseSurging:
		c.surging(ctx, w, r)
	case r.phase == PhaseDraining:
		c.drain(w, r, r.pool.name)
	case r.phase == PhaseDeleting:
		c.deleteOld(ctx, r)
	}
}

// surging protects the replacement's node once it registers and starts
// the drain once it is Ready, or gives up after the join timeout.
func (c *Controller) surging(ctx context.Context, w *world, r *replacement) {
	rc := w.settings(r.pool)
	if r.newNode != nil {
		c.protect(ctx, r.newNode, r.old.ID)
	}
	if ready(r.newNode) {
		if r.oldNode == nil {
			c.deleteOld(ctx, r)
			return
		}
		c.takeOut(ctx, w, r)
		return
	}
	if since := c.firstSeen(w, r); c.o.clock.Since(since) > rc.JoinTimeout {
		c.discard(ctx, r, fmt.Sprintf("the replacement %s did not become Ready within %v", r.newName, rc.JoinTimeout))
	}
}

// takeOut marks and cordons the old node once its replacement is Ready,
// then drains it. A node due for repair, still not Ready, is deleted
// without a drain instead: its pods cannot stop there (Kubernetes evicts
// the pods of an unreachable node itself).
func (c *Controller) takeOut(ctx context.Context, w *world, r *replacement) {
	repair := slices.Contains(w.reasons(r.pool, &r.old), ReasonNotReady)
	mark := Mark{Replacement: r.newName, Phase: PhaseDraining, Since: c.o.clock.Now(), KeepCordon: r.oldNode.Spec.Unschedulable}
	msg, reason, event := "replacement is Ready: draining the old node", "DrainStarted", "replacement %s is Ready; draining"
	if repair {
		mark.Phase, mark.Repair = PhaseDeleting, true
		msg, reason, event = "replacement is Ready: deleting the node that is not Ready without a drain", "RepairDeleting",
			"replacement %s is Ready; the node is not Ready: deleting it without a drain"
	}
	if err := c.cordonMarked(ctx, r.oldNode, mark); err != nil {
		c.o.log.Warn("could not cordon the node being replaced", zap.String("node", r.old.Name), zap.Error(err))
		return
	}
	c.o.log.Info(msg, zap.String("pool", r.pool.name), zap.String("node", r.old.Name), zap.String("replacement", r.newName))
	c.event(r.oldNode, corev1.EventTypeNormal, reason, event, r.newName)
	r.mark, r.hasMark, r.phase = mark, true, mark.Phase
	if repair {
		c.deleteOld(ctx, r)
		return
	}
	c.drain(w, r, r.pool.name)
}

// firstSeen returns when the replacement was created: its server's
// creation time, else when this Controller first saw its claim.
func (c *Controller) firstSeen(w *world, r *replacement) time.Time {
	if s := w.serverByID(r.newID); s != nil && !s.Created.IsZero() {
		return s.Created
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[r.newName]
	if !ok {
		t = c.o.clock.Now()
		c.seen[r.newName] = t
	}
	return t
}

// discard deletes a replacement that will not serve (its create failed,
// or it did not join) and stops the pool's rollout: the old node is left
// as it is. A replacement whose node runs pods a drain would move (it
// registered and took pods, then a person cordoned it, or it went not
// Ready) is not deleted, which would take the pods down without a drain:
// it stays as an ordinary node, its protection lifted, and the stop names
// it.
func (c *Controller) discard(ctx context.Context, r *replacement, why string) {
	if r.newNode != nil {
		pods, err := nodedrain.PodsToMove(ctx, c.client, r.newNode.Name)
		if err != nil {
			c.o.log.Warn("could not list the pods of the replacement that did not become Ready; trying again at the next step", zap.String("replacement", r.newName), zap.Error(err))
			return
		}
		if len(pods) > 0 {
			c.stop(ctx, r, why+"; it runs pods and stays as an ordinary node", "failed")
			return
		}
	}
	if p := c.poolNamed(r.newPool.name); p != nil {
		id := pool.ClaimID(r.newPool.name, r.newName)
		if r.newID != 0 {
			id = fmt.Sprintf("hcloud://%d", r.newID)
		}
		if err := p.ForceDeleteInstances(ctx, []string{id}); err != nil {
			c.o.log.Warn("could not delete the replacement that did not join", zap.String("replacement", r.newName), zap.Error(err))
			return
		}
	}
	c.stop(ctx, r, why, "failed")
}

// stop ends a replacement without deleting the old server: the old node
// is uncordoned (the lifecycle cordoned it), its mark replaced by a Stop,
// the replacement unprotected.
func (c *Controller) stop(ctx context.Context, r *replacement, why, result string) {
	c.o.log.Warn("replacement stopped; the old node goes on serving", zap.String("pool", r.pool.name), zap.String("node", r.old.Name), zap.String("replacement", r.newName), zap.String("reason", why))
	c.m.result(r.pool.name, result)
	c.unprotect(ctx, r.newNode)
	if result != "failed" {
		defer c.settle(ctx, r)
	}
	if r.oldNode == nil {
		return
	}
	// Uncordon first: the mark stays until the node serves again, so a
	// restart in between finds the replacement and ends it again.
	if r.hasMark && r.mark.Phase != PhaseSurging && !r.mark.KeepCordon {
		if err := nodedrain.Uncordon(ctx, c.client, r.oldNode.Name); err != nil {
			c.o.log.Warn("could not uncordon the node; trying again at the next step", zap.String("node", r.old.Name), zap.Error(err))
			return
		}
	}
	stop := encode(Stop{At: c.o.clock.Now(), Replacement: r.newName, Reason: why})
	if err := c.annotate(ctx, r.oldNode.Name, map[string]*string{ReplacementAnnotation: nil, StoppedAnnotation: &stop}); err != nil {
		c.o.log.Warn("could not record the stop on the node", zap.String("node", r.old.Name), zap.Error(err))
	}
	c.event(r.oldNode, corev1.EventTypeWarning, "ReplacementStopped", "%s", why)
}

// settle decides what becomes of the replacement of a stopped drain, so
// that the pool does not stay one node larger: one that holds nothing but
// DaemonSet and mirror pods is deleted; one that took pods over stays as
// an ordinary node (its protection lifted), for the autoscaler's
// scale-down to judge like any other.
func (c *Controller) settle(ctx context.Context, r *replacement) {
	if r.newName == "" || r.newID == 0 || r.newPool == nil {
		return
	}
	p := c.poolNamed(r.newPool.name)
	if p == nil {
		return
	}
	log := c.o.log.With(zap.String("pool", r.newPool.name), zap.String("replacement", r.newName))
	if busy, err := c.cordonIdle(ctx, r.newName); err != nil {
		log.Warn("could not tell whether the replacement runs pods; it stays", zap.Error(err))
		return
	} else if busy > 0 {
		log.Info("the replacement runs pods: it stays as an ordinary node", zap.Int("pods", busy))
		return
	}
	if err := p.DeleteInstances(ctx, []string{fmt.Sprintf("hcloud://%d", r.newID)}); err != nil {
		log.Warn("could not delete the unused replacement", zap.Error(err))
		return
	}
	log.Info("the unused replacement is deleted")
}

// cordonIdle cordons node (unless a person did) and returns how many
// pods a drain would move from it then: 0 leaves it cordoned, so that no
// pod lands on it before its delete, which may take a while to be
// accepted; more uncordons it again. A node that is not registered has
// none.
func (c *Controller) cordonIdle(ctx context.Context, node string) (int, error) {
	cordoned := false
	if n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil && !n.Spec.Unschedulable {
		if err := nodedrain.Cordon(ctx, c.client, node); err != nil {
			return 0, err
		}
		cordoned = true
	} else if apierrors.IsNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	pods, err := nodedrain.PodsToMove(ctx, c.client, node)
	if (err != nil || len(pods) > 0) && cordoned {
		if uerr := nodedrain.Uncordon(ctx, c.client, node); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}
	return len(pods), err
}

// orphan undoes the mark of a node whose replacement is gone (deleted by
// someone, or never created).
func (c *Controller) orphan(ctx context.Context, w *world, n *corev1.Node) {
	m, _ := markOf(n)
	id := w.serverOfNode(n)
	pv := w.poolOfServer(id)
	if pv == nil {
		return
	}
	r := &replacement{pool: pv, old: *w.serverByID(id), newName: m.Replacement, mark: m, hasMark: true, oldNode: n, phase: m.Phase}
	if m.Phase == PhaseSurging {
		// Nothing was cordoned: drop the mark and let the plan decide.
		if err := c.annotate(ctx, n.Name, map[string]*string{ReplacementAnnotation: nil}); err != nil {
			c.o.log.Warn("could not clear a stale mark", zap.String("node", n.Name), zap.Error(err))
		}
		return
	}
	// The drain may have stopped itself meanwhile: ask the node again.
	c.cancelDrain(id)
	now, err := c.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if m2, ok := markOf(now); !ok || m2 != m {
		return
	}
	r.oldNode = now
	c.stop(ctx, r, fmt.Sprintf("the replacement %s is gone", m.Replacement), "stopped")
}

// drainRun is a drain running in the background.
type drainRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the drain has returned
}

// drain runs the drain of r's old node in the background, once per node.
func (c *Controller) drain(w *world, r *replacement, poolName string) {
	rc, policy := w.settings(r.pool), w.policy(r.pool)
	timeout := rc.DrainTimeout - c.o.clock.Since(r.mark.Since)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, running := c.drains[r.old.ID]; running || c.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	untie := func() bool { return false }
	if w.lead != nil {
		untie = context.AfterFunc(w.lead, cancel) // leadership ended: stop at once
	}
	run := &drainRun{cancel: cancel, done: make(chan struct{})}
	c.drains[r.old.ID] = run // the goroutine's end takes mu: after this
	c.goLocked(func() {
		defer func() {
			c.mu.Lock()
			delete(c.drains, r.old.ID)
			c.mu.Unlock()
			untie()
			cancel()
			close(run.done)
			c.kick()
		}()
		c.runDrain(ctx, w.lead, r, poolName, timeout, policy)
	})
}

// cancelDrain stops the drain of the old server with ID old, if one runs,
// and waits until it has returned: no eviction of it follows.
func (c *Controller) cancelDrain(old int64) {
	c.mu.Lock()
	run := c.drains[old]
	c.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
}

// lead is the leadership context of the step that started the drain
// (nil: none), asked before each eviction.
func (c *Controller) runDrain(ctx, lead context.Context, r *replacement, poolName string, timeout time.Duration, policy nodedrain.Policy) {
	// Cordon again: after a restart between the mark and the cordon the
	// node may still take pods.
	err := c.replacementLive(ctx, r)
	if err == nil {
		err = nodedrain.Cordon(ctx, c.client, r.old.Name)
	}
	switch {
	case err != nil:
	case timeout <= 0:
		err = fmt.Errorf("the drain did not finish within its timeout (%v since it started)", c.o.clock.Since(r.mark.Since).Round(time.Second))
	default:
		o := c.o.drain
		o.Timeout, o.Log, o.Policy = timeout, c.o.log.With(zap.String("pool", poolName)), policy
		o.Check = func(ctx context.Context) error {
			if !c.o.leads() || (lead != nil && lead.Err() != nil) {
				return context.Canceled // the next leader carries on
			}
			return c.replacementLive(ctx, r)
		}
		err = nodedrain.Drain(ctx, c.client, r.old.Name, o)
	}
	if ctx.Err() != nil || errors.Is(err, errUnsure) || errors.Is(err, context.Canceled) {
		return // closed, no longer leading, or unsure: the next step carries on
	}
	if err != nil {
		c.stop(ctx, r, "the drain did not finish: "+err.Error(), "stopped")
		return
	}
	r.mark.Phase = PhaseDeleting
	mark := encode(r.mark)
	if err := c.annotate(ctx, r.old.Name, map[string]*string{ReplacementAnnotation: &mark}); err != nil {
		c.o.log.Warn("could not mark the drained node", zap.String("node", r.old.Name), zap.Error(err))
		return
	}
	c.deleteOld(ctx, r)
}

// errUnsure is why replacementLive could not tell: the question is asked
// again at the next step.
var errUnsure = errors.New("could not check the replacement")

// replacementLive returns nil when r's replacement may take the old
// node's place now: its instance exists and is not being deleted, and
// its node is Ready, schedulable and not being deleted. It reads the
// pool's instances and the node afresh; it is asked before every
// eviction and before the old server's delete. A node of a removed pool,
// drained out without a replacement, needs none while its pool stays
// removed; once the pool is configured again (a reload), it does.
func (c *Controller) replacementLive(ctx context.Context, r *replacement) error {
	if r.newName == "" {
		if p := c.poolNamed(r.pool.name); p != nil && (!p.Removed() || offeringOut(p) != nil) {
			return fmt.Errorf("the pool %s of the node drained out is configured again: the node needs a replacement", r.pool.name)
		}
		return nil
	}
	name := r.pool.name
	if r.newPool != nil {
		name = r.newPool.name
	}
	var in *pool.Instance
	if p := c.poolNamed(name); p != nil {
		for _, x := range p.Instances() {
			if x.Name == r.newName {
				in = &x
				break
			}
		}
	}
	switch {
	case in == nil:
		return fmt.Errorf("the replacement %s is gone", r.newName)
	case in.State == pool.Deleting:
		return fmt.Errorf("the replacement %s is being deleted", r.newName)
	case in.ServerID == 0 || in.Error != nil:
		return fmt.Errorf("the replacement %s has no server that runs", r.newName)
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, r.newName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the replacement %s has no node", r.newName)
	case err != nil:
		return fmt.Errorf("%w %s: %w", errUnsure, r.newName, err)
	case !ready(n):
		return fmt.Errorf("the node of the replacement %s is not Ready, cordoned or being deleted", r.newName)
	}
	return nil
}

// deleteOld deletes the replaced server through its pool, once its
// replacement is still there and Ready; else the replacement stops.
func (c *Controller) deleteOld(ctx context.Context, r *replacement) {
	p := c.poolNamed(r.pool.name)
	if p == nil {
		return
	}
	if r.mark.Repair && c.cameBack(ctx, r) {
		return
	}
	if err := c.replacementLive(ctx, r); errors.Is(err, errUnsure) {
		c.o.log.Warn("not deleting the replaced server yet", zap.String("node", r.old.Name), zap.Error(err))
		return
	} else if err != nil {
		c.stop(ctx, r, "the old server was not deleted: "+err.Error(), "stopped")
		return
	}
	if err := p.DeleteInstances(ctx, []string{r.old.ProviderID()}); err != nil {
		c.o.log.Warn("could not delete the replaced server; trying again at the next step", zap.String("node", r.old.Name), zap.Error(err))
		return
	}
	c.watchDelete(p, r.old.ID)
	// A step may ask again before the listing shows the delete: say it
	// once.
	c.mu.Lock()
	again := c.deleted[r.old.ID]
	c.deleted[r.old.ID] = true
	c.mu.Unlock()
	if again {
		return
	}
	c.o.log.Info("node replaced: old server deleted", zap.String("pool", r.pool.name), zap.String("node", r.old.Name), zap.String("replacement", r.newName))
	if r.oldNode != nil {
		how := "drained and deleted"
		if r.mark.Repair {
			how = "deleted without a drain (not Ready)"
		}
		c.event(r.oldNode, corev1.EventTypeNormal, "Replaced", "%s; replaced by %s", how, r.newName)
	}
	c.m.result(r.pool.name, "done")
}

// cameBack asks, before each delete of a node being repaired, whether its
// node is Ready again: then it is marked to be drained (the next step
// drains it) and true is returned; true too when the node could not be
// read. A node that is gone, or still not Ready, may be deleted.
func (c *Controller) cameBack(ctx context.Context, r *replacement) bool {
	n, err := c.client.CoreV1().Nodes().Get(ctx, r.old.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		c.o.log.Warn("not deleting the node being repaired: it could not be read", zap.String("node", r.old.Name), zap.Error(err))
		return true
	case !kubeletReady(n):
		return false
	}
	mark := Mark{Replacement: r.newName, Phase: PhaseDraining, Since: c.o.clock.Now(), KeepCordon: r.mark.KeepCordon}
	v := encode(mark)
	if err := c.annotate(ctx, n.Name, map[string]*string{ReplacementAnnotation: &v}); err != nil {
		c.o.log.Warn("could not mark the node that came back for a drain", zap.String("node", n.Name), zap.Error(err))
		return true
	}
	r.mark, r.phase = mark, PhaseDraining
	c.o.log.Info("the node being repaired is Ready again: draining it instead of deleting it", zap.String("pool", r.pool.name), zap.String("node", n.Name))
	c.event(n, corev1.EventTypeNormal, "RepairDraining", "the node is Ready again: drained before its delete")
	return true
}

// stopDrains cancels the drains in progress (the process no longer leads).
func (c *Controller) stopDrains() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, run := range c.drains {
		run.cancel()
	}
}

// cordonMarked marks the node, then cordons it: a mark without a cordon
// is recovered (the next step cordons again), a cordon without a mark
// would look like a person's.
func (c *Controller) cordonMarked(ctx context.Context, n *corev1.Node, m Mark) error {
	v := encode(m)
	if err := c.annotate(ctx, n.Name, map[string]*string{ReplacementAnnotation: &v}); err != nil {
		return err
	}
	return nodedrain.Cordon(ctx, c.client, n.Name)
}

func (c *Controller) protect(ctx context.Context, n *corev1.Node, old int64) {
	if _, ok := n.Annotations[ProtectsAnnotation]; ok {
		return
	}
	if n.Annotations[ScaleDownDisabledAnnotation] == "true" {
		return // someone else's: leave it, and never remove it
	}
	t, id := "true", fmt.Sprint(old)
	if err := c.annotate(ctx, n.Name, map[string]*string{ScaleDownDisabledAnnotation: &t, ProtectsAnnotation: &id}); err != nil {
		c.o.log.Warn("could not protect the replacement from scale-down", zap.String("node", n.Name), zap.Error(err))
	}
}

func (c *Controller) unprotect(ctx context.Context, n *corev1.Node) {
	if n == nil {
		return
	}
	if _, ok := n.Annotations[ProtectsAnnotation]; !ok {
		return
	}
	if err := c.annotate(ctx, n.Name, map[string]*string{ScaleDownDisabledAnnotation: nil, ProtectsAnnotation: nil}); err != nil {
		c.o.log.Warn("could not lift the scale-down protection", zap.String("node", n.Name), zap.Error(err))
	}
}

func (c *Controller) event(n *corev1.Node, kind, reason, format string, args ...any) {
	if c.o.recorder != nil && n != nil {
		c.o.recorder.Eventf(n, kind, reason, format, args...)
	}
}

// annotate sets (non-nil) and removes (nil) annotations of a node in one
// merge patch.
func (c *Controller) annotate(ctx context.Context, node string, set map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s: annotating: %w", node, err)
	}
	return nil
}
