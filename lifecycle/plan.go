package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Reasons a node is due, as a Step's Reasons and the metrics' reason label
// carry them: "drift:<reason>" per drift reason (config.DriftReasons),
// ReasonExpired, ReasonRemovedPool and ReasonNotReady.
const (
	ReasonExpired     = "expired"
	ReasonRemovedPool = "removed_pool"
	// ReasonNotReady is a repair: the node has not been Ready for the
	// pool's repairAfter.
	ReasonNotReady = "repair:not_ready"
)

// Step states.
const (
	// StateStart: nothing blocks the node; the controller starts its
	// replacement now (in a dry run: would start).
	StateStart = "start"
	// StateBlocked: the node is due, but something in Blocked holds it.
	StateBlocked = "blocked"
	// StateInProgress: the node is being replaced (see Phase).
	StateInProgress = "in_progress"
)

// Plan is what the lifecycle would do now: every node that is due or
// being replaced, and why.
type Plan struct {
	At    time.Time
	Steps []Step
}

// Step is one node of a Plan.
type Step struct {
	Pool     string
	Node     string // the server name, which is the node name
	ServerID int64
	Reasons  []string
	State    string
	// Phase and Replacement describe a replacement in progress (State
	// StateInProgress): Replacement is the new server's name, empty for a
	// node of a removed pool.
	Phase       Phase
	Replacement string
	// Blocked says what holds a due node (State StateBlocked), one entry
	// per cause, in words.
	Blocked []string
	// Into is the node group the replacement is created in when it is
	// not the node's own: another offering of the node's pool, for a node
	// moved back to an earlier offering (drift reason offering).
	Into string
	// Surge is true when the replacement takes the pool above its max
	// size (counted across its offerings).
	Surge bool
	// HourlyOld is the hourly net price of the server replaced, HourlyNew
	// of its replacement, at current prices; PriceKnown is false when the
	// catalogue has either price missing, and for a node of a removed
	// pool, which gets no replacement (both prices 0).
	HourlyOld, HourlyNew float64
	PriceKnown           bool
}

// Count returns how many steps are in state.
func (p *Plan) Count(state string) int {
	n := 0
	for i := range p.Steps {
		if p.Steps[i].State == state {
			n++
		}
	}
	return n
}

// poolView is what the planner knows of one pool.
type poolView struct {
	name    string
	removed bool
	// family is the configured pool the node group is an offering of
	// ("": the group's own name): budgets and the bound max + maxSurge
	// count across a family's groups; max is the pool's, across them.
	family string
	// soldOut: the group's offering may not be scaled up now; moveTo
	// names the group of the earlier offering of the pool that is
	// available, "" when none is (pool.Pool.EarlierAvailable).
	soldOut   bool
	moveTo    string
	replace   *config.Replace // nil: the pool replaces nothing
	target    int
	max       int
	servers   []servercache.Server
	instances []pool.Instance
	drift     map[int64][]pool.DriftReason
	taints    []corev1.Taint // the pool's taints, for config.DriftNodeTaints
	deleting  int            // instances being deleted: they count against max + maxSurge until gone
	hourly    float64        // a new server's price; valid when priced
	priced    bool
}

// pool returns the name of the configured pool pv is a node group of.
func (pv *poolView) pool() string { return cmp.Or(pv.family, pv.name) }

// world is everything a plan is made from: no I/O happens in planning.
type world struct {
	now     time.Time
	cluster config.ClusterReplace
	pools   []poolView
	nodes   map[int64]*corev1.Node  // by server ID (provider ID, else name)
	byName  map[string]*corev1.Node // by node name
	price   func(serverType, location string) (float64, bool)

	stops map[string]stopSeen // lastStop's answers, by pool
	// podBlocks holds what pods hold on a node's drain, by server ID:
	// the Controller's answers for the nodes a plan would start.
	podBlocks map[int64][]string
	// health is clusterHealth's answer, once asked in a plan.
	health *health
	// lead ends when this process stops leading (WithLeaderContext); the
	// drains a step starts end with it. Nil in a plan.
	lead context.Context
}

// health counts the nodes of the cluster's servers: those with a node,
// and of them the unhealthy ones (not Ready, or the server not running).
type health struct{ nodes, unhealthy int }

type stopSeen struct {
	stop  Stop
	found bool
}

// replacement is a replacement in progress, as read back from the API.
type replacement struct {
	pool     *poolView // the old server's pool
	old      servercache.Server
	newName  string // empty: a node of a removed pool drained out
	newID    int64  // 0 while the replacement server does not exist
	newPool  *poolView
	failed   *pool.ErrorInfo // the replacement's create failed
	phase    Phase
	mark     Mark
	hasMark  bool
	oldNode  *corev1.Node
	newNode  *corev1.Node
	replaced bool // the old server is gone: only the protection is left
	// oldGoing: the old server's delete is requested and has not ended;
	// it may yet fail. Nothing is done meanwhile, but the replacement
	// holds its slot until the server is gone or listed again.
	oldGoing bool
}

// inventory indexes a world: servers by ID and the replacements in
// progress.
type inventory struct {
	servers map[int64]*servercache.Server
	poolOf  map[int64]*poolView
	// byOld holds the replacements in progress by the old server's ID;
	// done those whose old server is gone (their new node may still
	// carry the protection); stopped the replacements a Stop on the old
	// node ended, by new server name.
	byOld   map[int64]*replacement
	done    []*replacement
	orphans []*corev1.Node // marked nodes whose replacement is gone
	// going holds the servers whose delete is requested and has not
	// ended, by ID: the pools list them as Deleting instances, not as
	// servers.
	going map[int64]goingServer
}

// goingServer is a server being deleted.
type goingServer struct {
	pool *poolView
	name string
}

func (w *world) index() *inventory {
	inv := &inventory{servers: map[int64]*servercache.Server{}, poolOf: map[int64]*poolView{}, byOld: map[int64]*replacement{}, going: map[int64]goingServer{}}
	for i := range w.pools {
		pv := &w.pools[i]
		for j := range pv.servers {
			s := &pv.servers[j]
			inv.servers[s.ID] = s
			inv.poolOf[s.ID] = pv
		}
		for _, in := range pv.instances {
			if in.State == pool.Deleting && in.ServerID != 0 {
				inv.going[in.ServerID] = goingServer{pool: pv, name: in.Name}
			}
		}
	}
	for i := range w.pools {
		w.replacementsOf(inv, &w.pools[i])
	}
	w.drainOuts(inv)
	return inv
}

// replacementsOf finds the replacements pv's claims and servers are.
func (w *world) replacementsOf(inv *inventory, pv *poolView) {
	for _, in := range pv.instances {
		if in.Replaces <= 0 || in.State == pool.Deleting {
			continue // a replacement being deleted replaces nothing
		}
		r := &replacement{old: servercache.Server{ID: in.Replaces}, newName: in.Name, newID: in.ServerID, newPool: pv, failed: in.Error}
		r.newNode = w.nodeOf(in.ServerID, in.Name)
		if old, ok := inv.servers[in.Replaces]; ok {
			r.old, r.pool = *old, inv.poolOf[old.ID]
		} else if g, going := inv.going[in.Replaces]; going {
			r.old, r.pool, r.oldGoing = servercache.Server{ID: in.Replaces, Name: g.name}, g.pool, true
		} else {
			r.replaced = true
			inv.done = append(inv.done, r)
			continue
		}
		r.oldNode = w.nodeOf(r.old.ID, r.old.Name)
		if r.oldNode != nil {
			if st, stopped := stopOf(r.oldNode); stopped && st.Replacement == in.Name {
				r.replaced = true // ended: the new node is an ordinary one
				inv.done = append(inv.done, r)
				continue
			}
			r.mark, r.hasMark = markOf(r.oldNode)
		}
		r.phase = PhaseSurging
		switch {
		case r.oldGoing:
			r.phase = PhaseDeleting
		case r.hasMark && r.mark.Replacement == in.Name:
			r.phase = r.mark.Phase
		}
		if prev, dup := inv.byOld[r.old.ID]; !dup || prev.newID == 0 {
			inv.byOld[r.old.ID] = r
		}
	}
}

// drainOuts finds the nodes drained out without a replacement and the
// marks whose replacement is gone.
func (w *world) drainOuts(inv *inventory) {
	for _, n := range w.byName {
		m, ok := markOf(n)
		if !ok {
			continue
		}
		id := w.serverOfNode(n)
		if _, busy := inv.byOld[id]; busy {
			continue
		}
		s, listed := inv.servers[id]
		g, going := inv.going[id]
		switch {
		case !listed && going:
			// Its delete has not ended: it holds its slot until it does.
			inv.byOld[id] = &replacement{pool: g.pool, old: servercache.Server{ID: id, Name: g.name}, newName: m.Replacement,
				phase: PhaseDeleting, mark: m, hasMark: true, oldNode: n, oldGoing: true}
		case !listed:
			// The server is gone: nothing to undo.
		case m.Replacement == "":
			inv.byOld[id] = &replacement{pool: inv.poolOf[id], old: *s, phase: m.Phase, mark: m, hasMark: true, oldNode: n}
		default:
			inv.orphans = append(inv.orphans, n)
		}
	}
}

// nodeOf returns the node of a server: by provider ID, else by name.
func (w *world) nodeOf(id int64, name string) *corev1.Node {
	if n := w.nodes[id]; n != nil {
		return n
	}
	if n := w.byName[name]; n != nil && n.Spec.ProviderID == "" {
		return n
	}
	return nil
}

// serverOfNode returns the server ID of a node: its provider ID's, else
// the ID of the listed server with the node's name.
func (w *world) serverOfNode(n *corev1.Node) int64 {
	if id := serverIDOfNode(n); id != 0 {
		return id
	}
	for i := range w.pools {
		for j := range w.pools[i].servers {
			if w.pools[i].servers[j].Name == n.Name {
				return w.pools[i].servers[j].ID
			}
		}
		for _, in := range w.pools[i].instances {
			if in.State == pool.Deleting && in.ServerID != 0 && in.Name == n.Name {
				return in.ServerID // being deleted: no longer a listed server
			}
		}
	}
	return 0
}

// plan makes the Plan of w; inv is w.index().
func (w *world) plan(inv *inventory) *Plan {
	p := &Plan{At: w.now}
	w.stops, w.health = nil, nil
	inFlight := map[string]int{}
	for _, r := range sortedReplacements(inv.byOld) {
		st := Step{Pool: r.pool.name, Node: r.old.Name, ServerID: r.old.ID, State: StateInProgress, Phase: r.phase, Replacement: r.newName}
		if r.newPool != nil && r.newPool != r.pool {
			st.Into = r.newPool.name
		}
		st.Reasons = w.reasons(r.pool, &r.old)
		p.Steps = append(p.Steps, st)
		inFlight[r.pool.pool()]++
	}
	total := len(inv.byOld)
	started := map[string]int{}
	for _, c := range w.candidates(inv) {
		st := w.decide(c, inFlight, started, total)
		if st.State == StateStart {
			inFlight[c.pool.pool()]++
			started[c.pool.pool()]++
			total++
		}
		p.Steps = append(p.Steps, st)
	}
	return p
}

func sortedReplacements(m map[int64]*replacement) []*replacement {
	out := make([]*replacement, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *replacement) int { return cmp.Compare(a.old.ID, b.old.ID) })
	return out
}

// candidate is a due server that is not being replaced.
type candidate struct {
	pool    *poolView
	server  *servercache.Server
	node    *corev1.Node
	reasons []string
}

// candidates returns the due servers, oldest first.
func (w *world) candidates(inv *inventory) []candidate {
	var out []candidate
	for i := range w.pools {
		pv := &w.pools[i]
		for j := range pv.servers {
			s := &pv.servers[j]
			if _, busy := inv.byOld[s.ID]; busy || w.isReplacement(inv, s) {
				continue
			}
			if rs := w.reasons(pv, s); len(rs) > 0 {
				out = append(out, candidate{pool: pv, server: s, node: w.nodeOf(s.ID, s.Name), reasons: rs})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(a.server.Created.Compare(b.server.Created), cmp.Compare(a.server.ID, b.server.ID))
	})
	return out
}

// isReplacement reports whether s replaces a server that still exists.
func (w *world) isReplacement(inv *inventory, s *servercache.Server) bool {
	id := replacesOf(s, config.LabelReplaces)
	if id == 0 {
		return false
	}
	r, ok := inv.byOld[id]
	return ok && r.newName == s.Name
}

// reasons returns why s is due in pv, if it is.
func (w *world) reasons(pv *poolView, s *servercache.Server) []string {
	if pv.removed {
		if w.cluster.RemovedPools {
			return []string{ReasonRemovedPool}
		}
		return nil
	}
	rc := pv.replace
	if !rc.Enabled() {
		return nil
	}
	var out []string
	for _, d := range pv.drift[s.ID] {
		if slices.Contains(rc.Drift, string(d)) {
			out = append(out, "drift:"+string(d))
		}
	}
	if slices.Contains(rc.Drift, config.DriftNodeTaints) && lacksTaint(w.nodeOf(s.ID, s.Name), pv.taints) {
		out = append(out, "drift:"+config.DriftNodeTaints)
	}
	if rc.ExpireAfter > 0 && !s.Created.IsZero() && !w.now.Before(expiry(s, rc)) {
		out = append(out, ReasonExpired)
	}
	if rc.RepairAfter > 0 {
		if since, down := notReadySince(w.nodeOf(s.ID, s.Name)); down && w.now.Sub(since) >= rc.RepairAfter {
			out = append(out, ReasonNotReady)
		}
	}
	return out
}

// clusterHealth returns the health of the cluster's nodes, counted once.
func (w *world) clusterHealth() health {
	if w.health != nil {
		return *w.health
	}
	h := health{}
	for i := range w.pools {
		for j := range w.pools[i].servers {
			s := &w.pools[i].servers[j]
			n := w.nodeOf(s.ID, s.Name)
			if n == nil {
				continue // joining, or gone
			}
			h.nodes++
			if _, down := notReadySince(n); down || s.Status != "running" {
				h.unhealthy++
			}
		}
	}
	w.health = &h
	return h
}

// lacksTaint reports whether a node lacks one of taints (by key and
// effect); false for no node.
func lacksTaint(n *corev1.Node, taints []corev1.Taint) bool {
	if n == nil {
		return false
	}
	for _, t := range taints {
		if !slices.ContainsFunc(n.Spec.Taints, func(h corev1.Taint) bool { return h.Key == t.Key && h.Effect == t.Effect }) {
			return true
		}
	}
	return false
}

// expiry is when s expires: its creation plus ExpireAfter plus a jitter
// in [0, ExpireJitter) fixed by the server's ID.
func expiry(s *servercache.Server, rc *config.Replace) time.Time {
	t := s.Created.Add(rc.ExpireAfter)
	if rc.ExpireJitter <= 0 {
		return t
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(strconv.FormatInt(s.ID, 10)))
	return t.Add(time.Duration(h.Sum64() % uint64(rc.ExpireJitter)))
}

// decide returns the Step of a candidate given what is already in flight.
// inFlight and started count per pool across its offerings (by family):
// started the replacements this plan starts, each raising the pool's
// target by one.
func (w *world) decide(c candidate, inFlight, started map[string]int, total int) Step {
	pv := c.pool
	st := Step{Pool: pv.name, Node: c.server.Name, ServerID: c.server.ID, Reasons: c.reasons, State: StateStart}
	into := w.into(c)
	if into != nil && into != pv {
		st.Into = into.name
	}
	w.pricesOf(&st, into, c.server)
	block := func(format string, args ...any) { st.Blocked = append(st.Blocked, fmt.Sprintf(format, args...)) }
	rc := w.settings(pv)
	if w.cluster.Paused || rc.Paused {
		block("paused")
	}
	repair := slices.Contains(c.reasons, ReasonNotReady)
	if !repair {
		w.windowBlocks(rc, block)
	}
	if stop, at := w.lastStop(pv); at && w.now.Before(stop.At.Add(rc.RetryAfter)) {
		block("the pool's last replacement stopped at %s (%s); retrying after %s", stop.At.Format(time.RFC3339), stop.Reason, stop.At.Add(rc.RetryAfter).Format(time.RFC3339))
	}
	if n := inFlight[pv.pool()]; n >= rc.MaxInFlight {
		block("the pool has %d of %d replacements in progress (maxInFlight)", n, rc.MaxInFlight)
	}
	if limit := max(w.cluster.MaxInFlight, 1); total >= limit {
		block("the cluster has %d of %d replacements in progress (replace.maxInFlight)", total, limit)
	}
	if repair {
		w.repairBlocks(c, block)
	} else {
		w.nodeBlocks(c, block)
		st.Blocked = append(st.Blocked, w.podBlocks[c.server.ID]...)
	}
	if slices.Contains(c.reasons, "drift:"+config.DriftNodeTaints) && replacesOf(c.server, config.LabelReplaces) != 0 {
		// A replacement came up without the taint: another would too.
		block("the node replaced another and lacks the pool's taints as well: register them with the kubelet (cloud-init) or run the node labeller (--label-nodes)")
	}
	if !pv.removed {
		w.surgeBlocks(&st, c, into, rc, started, block)
	}
	if len(st.Blocked) > 0 {
		st.State = StateBlocked
	}
	return st
}

// into returns the node group a candidate's replacement is created in:
// for a node moved back to an earlier offering (drift reason offering),
// the first available offering before its own; else its own. Nil when
// the node is due for that reason but no earlier offering is available
// any more.
func (w *world) into(c candidate) *poolView {
	if !slices.Contains(c.reasons, "drift:"+config.DriftOffering) {
		return c.pool
	}
	return w.poolView(c.pool.moveTo)
}

// surgeBlocks adds what holds the replacement's surge: the pool's max +
// maxSurge, counted as pool.Surge counts, across the pool's offerings (a
// server counts until its delete ends), and an offering that is sold out.
func (w *world) surgeBlocks(st *Step, c candidate, into *poolView, rc config.Replace, started map[string]int, block func(string, ...any)) {
	pv := c.pool
	target, deleting := w.familyUse(pv)
	after := target + started[pv.pool()] + 1
	st.Surge = after > pv.max
	switch {
	case after > pv.max+rc.MaxSurge:
		block("the pool is at its max size %d and may surge by %d (maxSurge)", pv.max, rc.MaxSurge)
	case after+deleting > pv.max+rc.MaxSurge:
		block("the pool is at its max size %d and may surge by %d (maxSurge) once its %d deletes in flight end", pv.max, rc.MaxSurge, deleting)
	}
	switch {
	case into == nil:
		block("no earlier offering of the pool is available any more")
	case into.soldOut:
		block("the offering of node group %s is sold out: no replacement can be created there now", into.name)
	}
}

// familyUse returns the targets and the deletes in flight of the node
// groups of pv's pool, across its offerings.
func (w *world) familyUse(pv *poolView) (target, deleting int) {
	for i := range w.pools {
		if o := &w.pools[i]; o == pv || (pv.family != "" && o.family == pv.family) {
			target += o.target
			deleting += o.deleting
		}
	}
	return target, deleting
}

// windowBlocks holds a start outside the maintenance windows: the pool's,
// else the cluster's. A repair is not held by them: its node is out of
// service already.
func (w *world) windowBlocks(rc config.Replace, block func(string, ...any)) {
	windows := rc.Windows
	if len(windows) == 0 {
		windows = w.cluster.Windows
	}
	if open, next := config.OpenAny(windows, w.now); !open {
		if next.IsZero() {
			block("outside the maintenance windows")
		} else {
			block("outside the maintenance windows (next opens %s)", next.Format(time.RFC3339))
		}
	}
}

// repairBlocks adds what holds a repair: a node a person cordoned, and
// more unhealthy nodes in the cluster than replace.repairMaxUnhealthy
// allows.
func (w *world) repairBlocks(c candidate, block func(string, ...any)) {
	if c.node.Spec.Unschedulable {
		block("the node is cordoned (by someone else: the lifecycle replaces no node a person took out)")
	}
	limit := cmp.Or(w.cluster.RepairMaxUnhealthy, config.DefaultRepairMaxUnhealthy)
	if h := w.clusterHealth(); h.unhealthy > limit.Of(h.nodes) {
		block("%d of %d nodes are unhealthy, more than replace.repairMaxUnhealthy (%s) allows: a wider outage, which replacing nodes would not mend", h.unhealthy, h.nodes, limit)
	}
}

// nodeBlocks adds what about the candidate's node holds it.
func (w *world) nodeBlocks(c candidate, block func(string, ...any)) {
	switch {
	case c.server.Status != "running":
		block("the server is %s", c.server.Status)
	case c.node == nil:
		block("the server has no node")
	case c.node.Spec.Unschedulable:
		block("the node is cordoned (by someone else: the lifecycle replaces no node a person took out)")
	case !ready(c.node):
		block("the node is not Ready")
	}
}

// settings returns the replace settings a pool runs with: a removed
// pool's come from the cluster's.
func (w *world) settings(pv *poolView) config.Replace {
	if pv != nil && pv.replace != nil && !pv.removed {
		return *pv.replace
	}
	return config.Replace{
		MaxInFlight: max(w.cluster.MaxInFlight, 1),
		RetryAfter:  config.DefaultReplaceRetryAfter, DrainTimeout: config.DefaultReplaceDrainTimeout,
		JoinTimeout: config.DefaultReplaceJoinTimeout,
	}
}

// lastStop returns the newest Stop on the nodes of pv's pool, across its
// offerings.
func (w *world) lastStop(pv *poolView) (Stop, bool) {
	if seen, ok := w.stops[pv.pool()]; ok {
		return seen.stop, seen.found
	}
	var last Stop
	found := false
	for i := range w.pools {
		if o := &w.pools[i]; o != pv && (pv.family == "" || o.family != pv.family) {
			continue
		}
		for _, s := range w.pools[i].servers {
			n := w.nodeOf(s.ID, s.Name)
			if n == nil {
				continue
			}
			if s, ok := stopOf(n); ok && (!found || s.At.After(last.At)) {
				last, found = s, true
			}
		}
	}
	if w.stops == nil {
		w.stops = map[string]stopSeen{}
	}
	w.stops[pv.pool()] = stopSeen{last, found}
	return last, found
}

// pricesOf sets the step's prices: the old server's, and a new one's in
// into, the group the replacement is created in.
func (w *world) pricesOf(st *Step, into *poolView, s *servercache.Server) {
	if w.price == nil || into == nil || into.removed {
		return
	}
	old, okOld := w.price(s.ServerType, s.Location)
	st.HourlyOld, st.HourlyNew = old, into.hourly
	st.PriceKnown = okOld && into.priced
}

func (w *world) serverByID(id int64) *servercache.Server {
	for i := range w.pools {
		for j := range w.pools[i].servers {
			if w.pools[i].servers[j].ID == id {
				return &w.pools[i].servers[j]
			}
		}
	}
	return nil
}

func (w *world) poolOfServer(id int64) *poolView {
	for i := range w.pools {
		for j := range w.pools[i].servers {
			if w.pools[i].servers[j].ID == id {
				return &w.pools[i]
			}
		}
	}
	return nil
}

func (w *world) poolView(name string) *poolView {
	for i := range w.pools {
		if w.pools[i].name == name {
			return &w.pools[i]
		}
	}
	return nil
}
