package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/internal/metrics"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// ErrClosed is returned by the methods that change a pool after
// [Pool.Close].
var ErrClosed = errors.New("pool closed")

// ErrFenced is returned for a request that changes servers (a create and
// each of its retries, a delete, a power-on, an attach) which the process
// may not send now: with several replicas, only the one that holds the
// lease writes (see hcloudscale.WithFence). Nothing was sent. A create
// flow that meets it stops and leaves its server, if any, for the next
// leader to resume.
var ErrFenced = errors.New("not allowed to change servers: this replica does not hold the lease")

// Errors of requests a pool refuses, for errors.Is. Nothing is changed when
// one is returned.
var (
	// ErrInvalidDelta: IncreaseSize with n <= 0, DecreaseTargetSize with
	// delta >= 0, Surge with replaces <= 0 or maxSurge < 0.
	ErrInvalidDelta = errors.New("invalid size change")
	// ErrAboveMax: the increase would take the target size above the max
	// (for Surge: above the max plus its maxSurge).
	ErrAboveMax = errors.New("size increase too large")
	// ErrBelowMin: the delete would take the target size below the min.
	ErrBelowMin = errors.New("size decrease too large")
	// ErrNotInPool: an instance ID, provider ID or node name that names no
	// instance of the pool.
	ErrNotInPool = errors.New("instance does not belong to the pool")
)

// Deps are what a Pool works with. The clients and caches are shared by
// all pools of a cluster; the resolved references are looked up once by
// the caller (the pool never resolves names itself).
type Deps struct {
	Servers ServerAPI
	Waiter  *actionwait.Waiter
	Cache   *servercache.Cache
	Types   *servercache.TypeCatalog
	Images  *imageresolve.Resolver

	// ServerActions reads a server's action history, which tells whether
	// a stopped server ever started (see "Server lifecycle"). When nil,
	// New takes Servers' Action client if Servers is an
	// *hcloud.ServerClient; without either, a failed create flow keeps a
	// stopped server rather than delete one that may have run.
	ServerActions ServerActionAPI

	// Network is the resolved config.Pool.Network; nil when the pool has
	// none.
	Network *hcloud.Network
	// Firewalls and SSHKeys are the resolved config.Pool.Firewalls and
	// SSHKeys, in the same order.
	Firewalls []*hcloud.Firewall
	SSHKeys   []*hcloud.SSHKey
	// PlacementGroup is the resolved config.Pool.PlacementGroup; nil when
	// the pool has none.
	PlacementGroup *hcloud.PlacementGroup
	// PlacementGroups creates, lists and deletes the spread groups of a
	// pool with config.Pool.SpreadGroups; required for such a pool. The
	// client New is given stays for the pool's life.
	PlacementGroups PlacementGroupAPI
}

// Pool scales one node pool. Its methods are safe for concurrent use.
type Pool struct {
	// cfg holds what never changes: the name. The other settings change
	// with Reconfigure: read them from current().
	cfg struct{ Name string }
	// deps holds the shared clients and caches; the resolved references
	// are in the settings.
	deps    Deps
	set     atomic.Pointer[settings]
	opts    options
	log     *zap.Logger
	metrics *metrics.Set
	// untrackBounds stops the metrics reading the pool's bounds; set by
	// New, called by Close.
	untrackBounds func()
	offerings     *Offerings
	// family joins the node groups of the pool's offerings; nil: the
	// pool is a family of its own (WithFamily).
	family *Family
	// spread holds the spread groups the pool created; used while the
	// settings say SpreadGroups, and swept until it has no group left.
	spread *spreadGroups
	// ownLabels are the labels that make a server ours: the node-group
	// label and, with a cluster name, the cluster label.
	ownLabels map[string]string
	createSem chan struct{} // bounds create-side requests in flight
	deleteSem chan struct{} // bounds delete requests in flight

	wg sync.WaitGroup // every background goroutine of the pool

	// mu guards the fields below. It is the pool's own lock: no lock is
	// shared between pools, and none is held during I/O.
	mu sync.Mutex
	// closed stops new claims, deletes and background work.
	closed bool
	// claims holds every claim by server name: queued, creating, failed
	// (placeholders) and cancelled ones whose flow is still cleaning up.
	claims map[string]*claim
	// deleting holds the servers whose delete we requested, until their
	// delete action has finished and the cache forgot them.
	deleting map[int64]struct{}
	// tasks holds the cancel functions of running background work.
	tasks  map[uint64]context.CancelFunc
	nextID uint64
	// released holds the servers a resumed flow left alone, with the
	// status they were listed with: Resume skips them until a listing
	// shows another status.
	released map[int64]hcloud.ServerStatus
}

// New checks cfg and deps and returns a Pool. It does no I/O.
func New(cfg config.Pool, deps Deps, opts ...Option) (*Pool, error) {
	o := options{
		logger:            zap.NewNop(),
		clock:             clock.RealClock{},
		createConcurrency: defaultCreateConcurrency,
		deleteConcurrency: defaultDeleteConcurrency,
		unavailableTTL:    DefaultUnavailableTTL,
		createAttempts:    defaultCreateAttempts,
		cleanupAttempts:   defaultCleanupAttempts,
		deleteAttempts:    deleteAttempts,
		retryBackoff:      defaultRetryBackoff,
		spreadGrace:       DefaultSpreadGrace,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.creationTimeout == 0 {
		o.creationTimeout = config.DefaultCreationTimeout
	}

	if sc, ok := deps.Servers.(*hcloud.ServerClient); ok && sc != nil && sc.Action != nil && deps.ServerActions == nil {
		deps.ServerActions = sc.Action
	}
	set, errs := newSettings(cfg, deps, o.clusterName)
	errs = append(errs, checkOptions(cfg.Name, &o)...)
	if o.family != nil && o.family.name != cfg.FamilyName() {
		errs = append(errs, fmt.Errorf("pool %q: family %q is not the pool's %q", cfg.Name, o.family.name, cfg.FamilyName()))
	}
	m, err := metrics.New(o.registerer)
	if err != nil {
		errs = append(errs, fmt.Errorf("pool %q: %w", cfg.Name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	offerings := o.offerings
	if offerings == nil {
		offerings = newOfferings(o.clock, m)
	}
	own := map[string]string{config.LabelNodeGroup: cfg.FamilyName()}
	if v, ok := cfg.ServerLabels[config.LabelCluster]; ok {
		own[config.LabelCluster] = v
	}
	p := &Pool{
		deps:      deps,
		opts:      o,
		log:       o.logger.Named("pool").With(zap.String("pool", cfg.Name)),
		metrics:   m,
		offerings: offerings,
		family:    o.family,
		ownLabels: own,
		createSem: make(chan struct{}, o.createConcurrency),
		deleteSem: make(chan struct{}, o.deleteConcurrency),
		claims:    make(map[string]*claim),
		deleting:  make(map[int64]struct{}),
		tasks:     make(map[uint64]context.CancelFunc),
		released:  make(map[int64]hcloud.ServerStatus),
	}
	p.spread = &spreadGroups{
		pool: cfg.Name, labels: spreadLabels(cfg.Name, own[config.LabelCluster]),
		api: deps.PlacementGroups, cache: deps.Cache, clock: o.clock, grace: o.spreadGrace,
		log: p.log, limit: func() { m.PlacementGroupLimit.WithLabelValues(cfg.Name).Inc() },
		groups: map[int64]*spreadGroup{}, reserved: map[string]*reservation{}, taken: map[string]bool{},
	}
	p.cfg.Name = cfg.Name
	p.set.Store(set)
	if p.family != nil {
		p.family.join(p)
	}
	p.untrackBounds = p.trackBounds()
	return p, nil
}

// problems collects the errors of a check, each naming the pool.
type problems struct {
	pool string
	errs []error
}

func (ps *problems) add(format string, args ...any) {
	ps.errs = append(ps.errs, fmt.Errorf("pool %q: "+format, append([]any{ps.pool}, args...)...))
}

// checkConfig reports every problem of cfg on its own: sizes, offering and
// the labels that tie its servers to the pool and the cluster.
func checkConfig(cfg *config.Pool, clusterName string) []error {
	ps := problems{pool: cfg.Name}
	family := cfg.FamilyName()
	if err := config.CheckPoolName(family); err != nil {
		ps.errs = append(ps.errs, fmt.Errorf("pool: %w", err))
	}
	if i := cfg.OfferingIndex(); i < 0 || cfg.Name != config.GroupID(family, cfg.PoolOfferings(), i) {
		ps.add("server type %s in location %s is not an offering of pool %q, or the name is not its node group's", cfg.ServerType, cfg.Location, family)
	}
	if cfg.MinSize < 0 {
		ps.add("min size %d is negative", cfg.MinSize)
	}
	if cfg.MaxSize < cfg.MinSize {
		ps.add("max size %d is below min size %d", cfg.MaxSize, cfg.MinSize)
	}
	if cfg.ServerType == "" {
		ps.add("server type is empty")
	}
	if cfg.Location == "" {
		ps.add("location is empty")
	}
	if cfg.ServerLabels[config.LabelNodeGroup] != family {
		ps.add("server label %s is %q, want the pool name %q", config.LabelNodeGroup, cfg.ServerLabels[config.LabelNodeGroup], family)
	}
	if clusterName != "" && cfg.ServerLabels[config.LabelCluster] != clusterName {
		ps.add("server label %s is %q, want the cluster name %q", config.LabelCluster, cfg.ServerLabels[config.LabelCluster], clusterName)
	}
	if _, ok := cfg.ServerLabels[config.LabelReplaces]; ok {
		// Every server would claim to replace that server, and Surge's
		// servers would drift from the configured value.
		ps.add("server label %s is set by hcloudscale on replacement servers and cannot be configured", config.LabelReplaces)
	}
	return ps.errs
}

// checkDeps reports the dependencies that are missing or disagree with
// the references cfg makes.
func checkDeps(cfg *config.Pool, deps *Deps) []error {
	ps := problems{pool: cfg.Name}
	if deps.Servers == nil || deps.Waiter == nil || deps.Cache == nil || deps.Types == nil || deps.Images == nil {
		ps.add("deps: Servers, Waiter, Cache, Types and Images are required")
	}
	if (cfg.Network != "") != (deps.Network != nil) {
		ps.add("network %q and the resolved deps.Network (set: %t) disagree", cfg.Network, deps.Network != nil)
	}
	if cfg.SubnetIPRange.IsValid() && deps.Network == nil {
		ps.add("subnet IP range %s needs a network", cfg.SubnetIPRange)
	}
	if cfg.SpreadGroups && (cfg.PlacementGroup != "" || deps.PlacementGroups == nil) {
		ps.add("spread groups need deps.PlacementGroups and no fixed placement group (%q)", cfg.PlacementGroup)
	}
	if (cfg.PlacementGroup != "") != (deps.PlacementGroup != nil) {
		ps.add("placement group %q and the resolved deps.PlacementGroup (set: %t) disagree", cfg.PlacementGroup, deps.PlacementGroup != nil)
	}
	// Fewer resolved than configured is a reference written twice (by ID
	// and by name), resolved to one object.
	if n, m := len(cfg.Firewalls), len(deps.Firewalls); m > n || (n > 0 && m == 0) {
		ps.add("%d firewalls configured, %d resolved", n, m)
	}
	if n, m := len(cfg.SSHKeys), len(deps.SSHKeys); m > n || (n > 0 && m == 0) {
		ps.add("%d SSH keys configured, %d resolved", n, m)
	}
	return ps.errs
}

// checkOptions reports the options out of range.
func checkOptions(pool string, o *options) []error {
	ps := problems{pool: pool}
	if o.createConcurrency < 1 {
		ps.add("create concurrency %d must be at least 1", o.createConcurrency)
	}
	if o.deleteConcurrency < 1 {
		ps.add("delete concurrency %d must be at least 1", o.deleteConcurrency)
	}
	if o.creationTimeout < 0 {
		ps.add("creation timeout %s is negative", o.creationTimeout)
	}
	if o.unavailableTTL < 0 {
		ps.add("unavailable TTL %s is negative", o.unavailableTTL)
	}
	if o.spreadGrace < 0 {
		ps.add("spread grace %s is negative", o.spreadGrace)
	}
	if o.createAttempts < 1 || o.retryBackoff < 0 {
		ps.add("retry: %d attempts (at least 1) with backoff %s (not negative)", o.createAttempts, o.retryBackoff)
	}
	return ps.errs
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.cfg.Name }

// MinSize returns the configured minimum size; 0 once removed. In a
// pool of several offerings, the share of the pool's min this offering's
// group must hold (see [Family]).
func (p *Pool) MinSize() int {
	minSize, _ := p.familyBounds()
	return minSize
}

// MaxSize returns the configured maximum size; 0 once removed.
func (p *Pool) MaxSize() int {
	_, maxSize := p.familyBounds()
	return maxSize
}

// Config returns the pool's configuration, as of the last Reconfigure.
func (p *Pool) Config() config.Pool { return p.current().cfg }

// TargetSize returns the servers of the pool that exist and are not being
// deleted, plus the pending claims and the placeholders of failed claims
// (they stay counted until the autoscaler deletes them, which is what
// shrinks its pending scale-up). It answers from memory: the cache's
// current snapshot and the pool's claims.
func (p *Pool) TargetSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.targetLocked(p.viewLocked())
}

// viewLocked returns the cache's current snapshot, read under p.mu: with
// the claims (also read under p.mu) it forms the pool's view of one
// instant. A create flow publishes its server in the cache before it drops
// the claim under p.mu, and a delete forgets a server in the cache before
// it drops the deleting mark under p.mu; so whoever holds p.mu and reads
// the snapshot then sees a server either through its claim or mark, or in
// the snapshot, never neither and never both. A snapshot read before
// taking p.mu could predate a server whose claim is gone by the time the
// lock is held. p.mu must be held.
func (p *Pool) viewLocked() *servercache.Snapshot {
	return p.deps.Cache.Current()
}

// targetLocked counts the units that make up the target. snap must come
// from viewLocked under the same hold of p.mu.
func (p *Pool) targetLocked(snap *servercache.Snapshot) int {
	n := 0
	if snap != nil {
		for _, s := range p.members(snap) {
			if _, owned := p.claims[s.Name]; owned {
				continue // counted as its claim below
			}
			if p.deletingLocked(s) {
				continue
			}
			n++
		}
	}
	for _, c := range p.claims {
		if !c.cancelled {
			n++
		}
	}
	return n
}

func (p *Pool) deletingLocked(s *servercache.Server) bool {
	if s.Status == hcloud.ServerStatusDeleting {
		return true
	}
	_, ok := p.deleting[s.ID]
	return ok
}

// ensureListed lists the servers if there has never been a listing: the
// pool's sizes are meaningless without one. The snapshot itself is read
// later, under p.mu (see viewLocked).
func (p *Pool) ensureListed(ctx context.Context) error {
	if p.deps.Cache.Current() != nil {
		return nil
	}
	if _, err := p.deps.Cache.Get(ctx); err != nil {
		return fmt.Errorf("pool %q: listing servers: %w", p.cfg.Name, err)
	}
	return nil
}

// owns reports whether a server's labels make it one of the pool's. The
// cluster label scopes both ways: without a cluster name, a server
// labelled for a named cluster is not the pool's.
func (p *Pool) owns(labels map[string]string) bool {
	for k, v := range p.ownLabels {
		if labels[k] != v {
			return false
		}
	}
	return config.InCluster(labels, p.ownLabels[config.LabelCluster])
}

// startLocked runs fn in a background goroutine that Close waits for and,
// when it gives up waiting, cancels. It reports false once Close has
// begun, so that no goroutine starts after Close began to wait for them.
// p.mu must be held.
func (p *Pool) startLocked(fn func(ctx context.Context)) bool {
	if p.closed {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	id := p.nextID
	p.nextID++
	p.tasks[id] = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.tasks, id)
			p.mu.Unlock()
			cancel()
		}()
		fn(ctx)
	}()
	return true
}

// Close stops new claims and deletes, then waits for the create flows and
// delete waits in flight until ctx ends; after that it cancels them and
// waits for them to return. A cancelled create flow leaves its server
// alone: it carries the pool's labels, so the next Pool over the same
// project adopts it (or reports it as not started, see [Pool.Instances]).
// No goroutine of the pool outlives Close; a delete request already sent
// by a cancelled flow still runs to its answer (bounded, see
// DeleteInstances). The shared Waiter, cache and catalogue are not closed.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		p.mu.Lock()
		for _, cancel := range p.tasks {
			cancel()
		}
		p.mu.Unlock()
		<-done
		err = fmt.Errorf("pool %q: close: cancelled work in flight: %w", p.cfg.Name, ctx.Err())
	}
	p.untrackBounds()
	p.metrics.ForgetPool(p.cfg.Name)
	if p.family != nil {
		p.family.leave(p)
	}
	return err
}

// now returns the pool clock's time.
func (p *Pool) now() time.Time { return p.opts.clock.Now() }

// copyLabels returns the labels for a create request.
func (s *settings) copyLabels() map[string]string { return maps.Clone(s.cfg.ServerLabels) }
