package hcloudscale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/internal/metrics"
	"github.com/hcloudscale/hcloudscale/internal/pacer"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Cluster is a set of node pools that share one API client, one server
// listing, one server-type catalogue, one image resolver and one action
// poller. Its methods are safe for concurrent use.
type Cluster struct {
	client *hcloud.Client
	pacer  *pacer.Pacer
	log    *zap.Logger

	servers *servercache.Cache
	types   *servercache.TypeCatalog
	images  *imageresolve.Resolver
	waiter  *actionwait.Waiter

	// pools holds the configuration and its pools; Reconfigure replaces
	// it whole, under reconfigureMu.
	pools         atomic.Pointer[poolSet]
	reconfigureMu sync.Mutex      // also guards closed
	closed        bool            // Close has begun: Reconfigure adds no pool
	opts          options         // what New was given, for pools added later
	offerings     *pool.Offerings // shared by all pools
	familyMu      sync.Mutex      // guards families
	// families holds the node groups of each pool's offerings, by the
	// pool's name; kept across reconfigurations.
	families map[string]*pool.Family
	reload   *reloader // nil without WithReload
	drift    driftState
	warnMu   sync.Mutex // guards warnings
	warnings []string   // of the configuration that runs

	lenient    bool        // offer problems are warnings (WithLenientChecks)
	noResume   bool        // unfinished create flows are left alone (WithoutResume)
	resumeWhen func() bool // nil, or whether this replica may resume now (WithResumeWhen)
	presence   *presenceCache
	unregister func() // stops the rate-limit metrics reporting this Cluster

	closeOnce sync.Once
	closeErr  error

	// configChanged is closed, and replaced, when a configuration is
	// applied; nil until asked for.
	changedMu     sync.Mutex
	configChanged chan struct{}
}

// New checks cfg against the API and returns a Cluster ready to scale.
//
// Every reference the configuration makes is looked up once: the network and
// its subnets, each firewall, SSH key and placement group, each pool's server
// type (it must exist and be available in the pool's location) and the image
// for its architecture. All problems are reported together, each naming the
// setting it concerns. Deprecated server types and images, a server type
// sold out in its location (its pool starts with the offering marked
// unavailable, as after a capacity error) and a placement group short of
// room are warnings ([Cluster.Warnings], also logged, and logged too when
// New fails on something else), not errors.
//
// New makes about one request per reference plus one server listing and one
// server-type listing. Close the Cluster to stop its background work.
func New(ctx context.Context, cfg *config.Config, opts ...Option) (*Cluster, error) {
	if cfg == nil {
		return nil, errors.New("config is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if _, ok := o.transport.(*http.Transport); o.fence != nil && o.transport != nil && !ok {
		return nil, fmt.Errorf("WithTransport: a %T under WithFence: only an *http.Transport's connections can be checked at each write", o.transport)
	}
	c := &Cluster{
		log:        o.logger,
		opts:       o,
		warnings:   slices.Clone(cfg.Warnings),
		lenient:    o.lenient,
		noResume:   o.noResume,
		resumeWhen: o.resumeWhen,
		unregister: func() {},
	}
	c.client, c.pacer = newClient(cfg, &o)
	c.servers = servercache.New(&c.client.Server,
		servercache.WithClusterName(cfg.ClusterName),
		servercache.WithTTL(o.listTTL),
		servercache.WithClock(o.clock),
		servercache.WithLogger(o.logger),
	)
	c.types = servercache.NewTypeCatalog(&c.client.ServerType,
		servercache.WithClock(o.clock),
		servercache.WithLogger(o.logger),
	)
	c.images = imageresolve.New(&c.client.Image,
		imageresolve.WithClock(o.clock),
		imageresolve.WithLogger(o.logger),
	)
	c.presence = newPresenceCache(&c.client.Server, o.clock)
	c.storePools(&poolSet{cfg: cfg, byName: map[string]*pool.Pool{}})
	err := c.start(ctx, cfg, &o)
	// The warnings found so far are logged whether or not the Cluster
	// starts: they may explain why it did not.
	for _, w := range c.warnings {
		c.log.Warn(w)
	}
	if err != nil {
		// Close releases whatever start got to: pools, waiter, caches and
		// metrics registrations.
		_ = c.Close(context.Background())
		return nil, err
	}
	c.resume()
	return c, nil
}

// start registers the Cluster's metrics, checks the configuration against
// the API and builds the waiter and the pools. On error the caller closes
// the Cluster.
func (c *Cluster) start(ctx context.Context, cfg *config.Config, o *options) error {
	// The collectors of the waiter, the pools and the offerings, registered
	// here so that a conflict on the registerer fails New; they register
	// again through the same registerer and reuse these.
	if _, err := metrics.New(o.registerer); err != nil {
		return err
	}
	if err := c.registerMetrics(o.registerer); err != nil {
		return err
	}
	if err := c.registerReload(o); err != nil {
		return err
	}
	if err := c.registerDrift(o.registerer); err != nil {
		return err
	}
	refs, soldOut, warnings, err := c.check(ctx, cfg)
	c.warnings = append(c.warnings, warnings...)
	if err != nil {
		return err
	}
	c.waiter = actionwait.New(&c.client.Action,
		actionwait.WithPollInterval(o.pollInterval),
		actionwait.WithLogger(o.logger),
		actionwait.WithRegisterer(o.registerer),
		actionwait.WithClock(o.clock),
	)
	if c.offerings, err = pool.NewOfferings(o.clock, o.registerer); err != nil {
		return err
	}
	c.markSoldOut(soldOut)
	set := &poolSet{cfg: cfg, byName: map[string]*pool.Pool{}}
	// Stored as the pools are built, so that Close closes those built
	// when a later one fails.
	for _, pc := range cfg.NodeGroups() {
		p, err := c.newPool(cfg, pc, refs)
		if err != nil {
			return err
		}
		set = set.with(p)
		c.storePools(set)
	}
	set, offered := c.adoptRemovedOfferings(cfg, set, refs)
	_, adopted := c.adoptRemoved(cfg, set)
	c.warnings = append(c.warnings, offered...)
	c.warnings = append(c.warnings, adopted...)
	return nil
}

// newPool builds the pool pc of cfg with the Cluster's shared parts.
func (c *Cluster) newPool(cfg *config.Config, pc config.Pool, refs *references) (*pool.Pool, error) {
	o := &c.opts
	return pool.New(pc, c.poolDeps(&pc, refs),
		pool.WithFamily(c.family(pc.FamilyName())),
		pool.WithLogger(o.logger),
		pool.WithClock(o.clock),
		pool.WithRegisterer(o.registerer),
		pool.WithOfferings(c.offerings),
		pool.WithClusterName(cfg.ClusterName),
		pool.WithCreateConcurrency(o.createConcurrency),
		pool.WithDeleteConcurrency(o.deleteConcurrency),
		pool.WithCreationTimeout(cfg.CreationTimeout),
		pool.WithUnavailableTTL(cmp.Or(o.unavailableTTL, pool.DefaultUnavailableTTL)),
		pool.WithSpreadGrace(cmp.Or(o.spreadGrace, pool.DefaultSpreadGrace)),
	)
}

// family returns the family of the pool of that name, new if there is
// none yet.
func (c *Cluster) family(name string) *pool.Family {
	c.familyMu.Lock()
	defer c.familyMu.Unlock()
	if c.families == nil {
		c.families = map[string]*pool.Family{}
	}
	f := c.families[name]
	if f == nil {
		f = pool.NewFamily(name)
		c.families[name] = f
	}
	return f
}

// Offerings returns the registry of offerings remembered as unavailable,
// shared by all pools.
func (c *Cluster) Offerings() *pool.Offerings { return c.offerings }

// markSoldOut starts the pools whose server type the catalogue shows sold
// out in their location as after a capacity error.
func (c *Cluster) markSoldOut(soldOut []*config.Pool) {
	for _, p := range soldOut {
		c.offerings.MarkUnavailable(pool.UnavailableError{
			ServerType: p.ServerType, Location: p.Location, Code: pool.CodeServerTypeUnavailable,
			Message: fmt.Sprintf("server type %s is not available in location %s", p.ServerType, p.Location),
		}, cmp.Or(c.opts.unavailableTTL, pool.DefaultUnavailableTTL))
	}
}

// registerMetrics registers the rate-limit budget and the staleness of the
// caches with reg; c.unregister undoes both.
func (c *Cluster) registerMetrics(reg prometheus.Registerer) error {
	unregisterRate, err := registerRateLimit(reg, c.pacer)
	if err != nil {
		return err
	}
	c.unregister = unregisterRate
	unregisterStale, err := registerStale(reg, &staleSources{
		servers: c.servers.StaleSince, serverTypes: c.types.StaleSince, images: c.images.StaleSince,
	})
	if err != nil {
		return err
	}
	c.unregister = func() { unregisterRate(); unregisterStale() }
	return nil
}

// poolDeps returns what pool pc works with: the Cluster's shared clients
// and caches, and the references of pc resolved in refs.
func (c *Cluster) poolDeps(pc *config.Pool, refs *references) pool.Deps {
	deps := pool.Deps{
		Servers: &c.client.Server,
		Waiter:  c.waiter,
		Cache:   c.servers,
		Types:   c.types,
		Images:  c.images,
		SSHKeys: refs.sshKeys,

		PlacementGroups: &c.client.PlacementGroup,
	}
	if pc.Network != "" {
		deps.Network = refs.network
	}
	// A firewall written once by ID and once by name is sent once:
	// references are compared by what they resolve to.
	for _, fw := range pc.Firewalls {
		if f := refs.firewalls[fw]; !slices.ContainsFunc(deps.Firewalls, func(g *hcloud.Firewall) bool { return g.ID == f.ID }) {
			deps.Firewalls = append(deps.Firewalls, f)
		}
	}
	if pc.PlacementGroup != "" {
		deps.PlacementGroup = refs.placementGroups[pc.PlacementGroup]
	}
	return deps
}

// newClient builds the hcloud-go client. Requests pass, outermost first,
// through hcloud-go's instrumentation (when a registerer is set), the
// rate-limit pacer, the request timeout, the redacting debug log and the
// write fence (when one is set) before they reach the network. The
// timeout sits below the pacer, not in http.Client.Timeout, so that the
// time the pacer holds a request back does not count against it. The
// fence sits below everything that can hold or repeat a request.
func newClient(cfg *config.Config, o *options) (*hcloud.Client, *pacer.Pacer) {
	base := o.transport
	if base == nil {
		base = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   16,
			ForceAttemptHTTP2:     true,
		}
	}
	rt := newTimeoutTransport(newDebugTransport(newFenceTransport(base, o.fence), o.logger), o.requestTimeout)
	popts := []pacer.Option{pacer.WithLogger(o.logger), pacer.WithClock(o.clock)}
	if o.rateLimitReserve >= 0 {
		popts = append(popts, pacer.WithReserve(o.rateLimitReserve))
	}
	p := pacer.New(rt, popts...)
	httpClient := &http.Client{Transport: p}

	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = config.DefaultEndpoint
	}
	copts := []hcloud.ClientOption{
		hcloud.WithToken(cfg.Token.Reveal()),
		hcloud.WithEndpoint(endpoint),
		hcloud.WithApplication(o.appName, o.appVersion),
		hcloud.WithHTTPClient(httpClient),
		// Both fields always: WithRetryOpts assigns MaxRetries even when
		// left zero, which would disable retries.
		hcloud.WithRetryOpts(hcloud.RetryOpts{
			BackoffFunc: hcloud.ExponentialBackoffWithOpts(hcloud.ExponentialBackoffOpts{
				Base: time.Second, Multiplier: 2, Cap: 30 * time.Second, Jitter: true,
			}),
			MaxRetries: 3,
		}),
		// Our own waiter polls actions; this covers hcloud-go's helpers.
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Second)}),
	}
	if o.registerer != nil {
		copts = append(copts, hcloud.WithInstrumentation(o.registerer))
	}
	copts = append(copts, o.clientOptions...)
	return hcloud.NewClient(copts...), p
}

// refusedToken turns a token the API refuses, which fails every lookup,
// into one problem of the setting, instead of one per lookup; nil if err
// holds no such refusal.
func refusedToken(err error) error {
	var apiErr hcloud.Error
	if !errors.As(err, &apiErr) || apiErr.Code != hcloud.ErrorCodeUnauthorized {
		return nil
	}
	return fieldErr(config.EnvToken, "the API refused the token (%s, %s): check %s (or %s) and that the token is of this project",
		apiErr.Message, apiErr.Code, config.EnvToken, config.EnvTokenFile)
}

// check resolves the references and verifies server types, images and
// placement-group room, reporting every problem at once. A shortage is not
// a problem of the configuration: a pool whose server type the catalogue
// marks unavailable in its location is returned in soldOut, to start with
// its offering marked unavailable, and named in a warning; so is a
// placement group without room for the pools' max sizes. Both are capacity
// errors at runtime as well.
func (c *Cluster) check(ctx context.Context, cfg *config.Config) (refs *references, soldOut []*config.Pool, warnings []string, err error) {
	var errs []error
	refs, err = resolveReferences(ctx, newReferenceAPI(c.client), cfg)
	if err != nil {
		errs = append(errs, err)
	}

	types, err := c.types.All(ctx)
	if err != nil {
		errs = append(errs, err) // it says "listing server types"
	}
	if err := refusedToken(errors.Join(errs...)); err != nil {
		return nil, nil, nil, err
	}
	if err != nil {
		return nil, nil, nil, errors.Join(errs...)
	}
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	r := &checkReport{errs: errs, lenient: c.lenient}
	for i := range cfg.Pools {
		pc := cfg.Pools[i]
		if pc.Origin == "" {
			pc.Origin = config.PoolSetting(i, pc.Name)
		}
		for j, g := range pc.OfferingGroups() {
			c.checkPool(ctx, r, byName, offeringSetting{path: pc.OfferingSetting(j), later: j > 0}, &g)
		}
	}
	c.checkPlacement(ctx, r, cfg, refs)
	if len(r.errs) > 0 {
		return nil, nil, r.warnings, errors.Join(r.errs...)
	}
	return refs, r.soldOut, r.warnings, nil
}

// checkReport collects what check finds: errors, warnings and the pools
// whose offering is sold out.
type checkReport struct {
	errs     []error
	warnings []string
	soldOut  []*config.Pool
	// lenient makes offer problems warnings (WithLenientCheck).
	lenient bool
	// archs holds the architectures whose image is checked, per pool.
	archs map[string][]config.Arch
}

// firstOfArch reports whether the image of arch is not checked yet for the
// pool, and records it as checked.
func (r *checkReport) firstOfArch(pool string, arch config.Arch) bool {
	if slices.Contains(r.archs[pool], arch) {
		return false
	}
	if r.archs == nil {
		r.archs = map[string][]config.Arch{}
	}
	r.archs[pool] = append(r.archs[pool], arch)
	return true
}

func (r *checkReport) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

// offer records a problem of a pool's offering: an error unless the
// caller asked for them as warnings, since a server type that does not
// exist or a missing image stops scale-ups of that pool, not the
// inspection of the others.
func (r *checkReport) offer(err error) {
	if r.lenient {
		r.warnings = append(r.warnings, err.Error())
		return
	}
	r.errs = append(r.errs, err)
}

// offeringSetting names one of a pool's offerings in check's messages:
// path is [config.Pool.OfferingSetting]; later is set for an offering
// after the first, whose path is an element of the offerings list, so
// that a message can name its serverType or location key.
type offeringSetting struct {
	path  string
	later bool
}

// key returns the path of the offering's key name, or of the offering
// when it is the first (its --nodes entry has no keys).
func (o offeringSetting) key(name string) string {
	if o.later {
		return o.path + "." + name
	}
	return o.path
}

// checkPool checks the server type of one of a pool's offerings (the
// node group p), its offering in the location and the pool's image for
// the type's architecture (once per architecture of the pool: a later
// offering of an architecture checked already adds nothing); at names the
// offering in messages.
func (c *Cluster) checkPool(ctx context.Context, r *checkReport, byName map[string]*servercache.ServerType, at offeringSetting, p *config.Pool) {
	path := at.path
	t := byName[p.ServerType]
	if t == nil {
		r.offer(fieldErr(at.key("serverType"), "server type %q does not exist", p.ServerType))
		return
	}
	loc, ok := t.Locations[p.Location]
	switch {
	case !ok:
		r.offer(fieldErr(at.key("location"), "server type %q is not offered in location %q", p.ServerType, p.Location))
		return
	case !loc.Available:
		r.soldOut = append(r.soldOut, p)
		r.warn("%s: server type %q is not available in location %q (sold out); scale-ups of %s fail at once until the catalogue offers it again", path, p.ServerType, p.Location, offeringWhat(p))
	case loc.Deprecated && !loc.UnavailableAfter.IsZero():
		r.warn("%s: server type %q is deprecated in location %q and can be ordered until %s", path, p.ServerType, p.Location, loc.UnavailableAfter.UTC().Format(time.DateOnly))
	case loc.Deprecated:
		r.warn("%s: server type %q is deprecated in location %q", path, p.ServerType, p.Location)
	}
	if !r.firstOfArch(p.FamilyName(), t.Arch) {
		return
	}
	if slices.Contains(p.InheritedImages, t.Arch) {
		r.warn("%s: the pool's imagesForArch has no %s entry: its servers boot %q from the global imagesForArch, where upstream let the pool's object replace the global one and booted the newest %s snapshot; add %s to the pool's imagesForArch to choose",
			path, t.Arch, p.Images.ForArch(t.Arch), t.Arch, t.Arch)
	}
	// The pool's images are its offerings' too: its error names the pool.
	named := *p
	named.Name = p.FamilyName()
	img, err := c.images.ResolvePool(ctx, &named, t.Arch)
	switch {
	case err != nil:
		r.offer(fieldErr(path, "image for server type %q (%s): %w", p.ServerType, t.Arch, err))
	case img.Deprecated:
		r.warn("%s: image %q (%d) is deprecated", path, img.Name, img.ID)
	}
}

// offeringWhat names the pool of an offering's node group in a warning:
// "the pool", or "the offering of pool "workers"" for a later offering.
func offeringWhat(p *config.Pool) string {
	if p.Name == p.FamilyName() {
		return "the pool"
	}
	return fmt.Sprintf("this offering of pool %q", p.FamilyName())
}

// checkPlacement lists the servers and warns of placement groups without
// room for the pools' max sizes.
func (c *Cluster) checkPlacement(ctx context.Context, r *checkReport, cfg *config.Config, refs *references) {
	snap, err := c.servers.Get(ctx)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("listing servers: %w", err))
		return
	}
	if refs == nil {
		return
	}
	for _, w := range checkPlacementRoom(cfg, refs, func(id int64) string {
		if s := snap.ByID(id); s != nil {
			return s.Pool
		}
		return ""
	}) {
		r.warnings = append(r.warnings, w.Error())
	}
}

// Config returns the configuration the Cluster runs: the one it was built
// from, or the last one [Cluster.Reconfigure] applied. Do not modify it.
func (c *Cluster) Config() *config.Config { return c.pools.Load().cfg }

// Client returns the API client the Cluster uses, for requests of the
// caller's own. It shares the rate-limit pacer with the Cluster.
func (c *Cluster) Client() *hcloud.Client { return c.client }

// Warnings returns what New, or the last [Cluster.Reconfigure] that
// applied a configuration, found worth a warning: ignored configuration
// sources, unused nodeConfigs entries, behaviour that differs from the
// upstream provider for the same input, deprecated server types and
// images, sold-out server types, placement groups short of room, and
// servers of pools the configuration does not declare.
func (c *Cluster) Warnings() []string {
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	return slices.Clone(c.warnings)
}

// Pools returns the pools in the order of the configuration, then the
// pools removed from it that still have servers ([pool.Pool.Removed]).
func (c *Cluster) Pools() []*pool.Pool { return slices.Clone(c.pools.Load().list) }

// Pool returns the pool with that name, or nil.
func (c *Cluster) Pool(name string) *pool.Pool { return c.pools.Load().byName[name] }

// PoolForNode returns the pool a Kubernetes node belongs to, or nil when it
// belongs to none: control-plane servers, servers of other pools or
// clusters, Robot servers (hrobot://, hcloud://bm-), other providers. The
// node is found by its provider ID (hcloud://<server id>), by its name when
// the provider ID is empty, or by the instance ID of a server still being
// created (the autoscaler's placeholder nodes carry it as name and provider
// ID), or by the provider ID or name of a server a pool is creating, which
// the pool reports before any listing shows it, or of a server a pool
// deleted within [servercache.DepartedRetention]. It answers from memory:
// in constant time for listed servers and claim IDs, and for other nodes
// in time linear in the pools' claims.
func (c *Cluster) PoolForNode(providerID, nodeName string) *pool.Pool {
	set := c.pools.Load()
	if snap := c.servers.Current(); snap != nil {
		if s := snap.ByNode(providerID, nodeName); s != nil {
			return set.forServer(s)
		}
	}
	for _, id := range [2]string{providerID, nodeName} {
		if name, _, ok := pool.ParseClaimID(id); ok {
			return set.byName[name]
		}
	}
	// A server whose create request returned is reported by its pool as
	// hcloud://<id> before a listing shows it.
	for _, p := range set.list {
		if p.CreatesNode(providerID, nodeName) {
			return p
		}
	}
	// A server a pool deleted a moment ago: its Node, and the
	// autoscaler's cached instance of it, outlive it for a while, and the
	// autoscaler asks for their node group every loop (see
	// servercache.DepartedRetention).
	if name, ok := c.servers.Departed(providerID, nodeName); ok {
		return set.byName[name]
	}
	return nil
}

// Refresh brings the server listing up to date when its TTL has passed; it
// costs no request otherwise. Call it once per autoscaler loop. It then
// resumes the create flows the listing shows unfinished
// ([pool.Pool.Resume]), unless [WithoutResume] was given.
//
// With [WithReload], Refresh also applies what the configuration file
// holds now, if it changed and is valid ([Cluster.Reconfigure]); a file
// that is not is logged and reported ([Cluster.ReloadStatus]), never an
// error of Refresh. Pools removed from the configuration leave the
// Cluster once they are empty. With [WithRegisterer], a new listing or
// configuration updates hcloudscale_pool_drifted_servers
// ([Cluster.Drift]).
func (c *Cluster) Refresh(ctx context.Context) error {
	c.reloadIfChanged(ctx)
	_, err := c.servers.Get(ctx)
	c.dropEmptyRemoved(ctx)
	c.resume()
	c.updateDrift(ctx)
	return err
}

// resume lets every pool finish the create flows that a previous process
// (or a flow of another process still running) left unfinished, unless
// [WithoutResume] was given or [WithResumeWhen]'s function says no.
func (c *Cluster) resume() {
	if c.noResume || (c.resumeWhen != nil && !c.resumeWhen()) {
		return
	}
	for _, p := range c.pools.Load().list {
		p.Resume()
		p.SweepSpreadGroups()
	}
}

// Resume lets every pool finish the create flows the last listing shows
// unfinished ([pool.Pool.Resume]), as New and Refresh do by themselves. A
// replica built with [WithResumeWhen] calls it when it becomes the leader,
// after [Cluster.RefreshNow]. It does nothing with [WithoutResume].
func (c *Cluster) Resume() {
	c.resume()
}

// ServerTypes returns the server-type catalogue, cached.
func (c *Cluster) ServerTypes(ctx context.Context) ([]*servercache.ServerType, error) {
	return c.types.All(ctx)
}

// HasServer reports whether the server behind a provider ID exists, for the
// autoscaler's HasInstance. Servers of the cluster's pools are answered from
// the listing; other hcloud:// IDs (including servers of other clusters,
// which exist but are no pool's: see [Cluster.PoolForNode]) with one
// cached lookup. Provider IDs of
// other schemes give ErrNotHCloud.
func (c *Cluster) HasServer(ctx context.Context, providerID string) (bool, error) {
	id, ok := servercache.ParseProviderID(providerID)
	if !ok {
		return false, fmt.Errorf("provider ID %q: %w", providerID, ErrNotHCloud)
	}
	if snap := c.servers.Current(); snap != nil && snap.ByID(id) != nil {
		return true, nil
	}
	return c.presence.exists(ctx, id)
}

// ErrNotHCloud is returned for provider IDs that do not name a Hetzner Cloud
// server.
var ErrNotHCloud = errors.New("not a Hetzner Cloud server")

// RateLimit is what the Cluster knows of the project's API budget, from
// the RateLimit-* headers of the last answer and its own request count.
type RateLimit struct {
	// Limit, Remaining and Reset are the last headers seen; zero before
	// the first answer.
	Limit     int
	Remaining int
	Reset     time.Time
	// Estimated is the budget left now: Remaining less the requests sent
	// since, plus the refill.
	Estimated int
	// Waited is the total time requests were held back to keep the
	// reserve, and Got429 the number of rate_limit_exceeded answers.
	Waited time.Duration
	Got429 int
}

// RefreshNow lists the servers now, whatever the TTL. A replica that has
// just become the leader calls it before it changes anything: its listing
// may be older than the servers the previous leader created.
func (c *Cluster) RefreshNow(ctx context.Context) error {
	_, err := c.servers.Refresh(ctx)
	return err
}

// RateLimit returns what the Cluster knows of the project's API budget.
func (c *Cluster) RateLimit() RateLimit {
	s := c.pacer.Stats()
	return RateLimit{
		Limit: s.Limit, Remaining: s.Remaining, Reset: s.Reset, Estimated: s.Estimated,
		Waited: s.Waited, Got429: s.Got429,
	}
}

// Close stops the pools (in-flight creates may finish until ctx ends, then
// they are cancelled) and the action poller, and waits for them.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.reconfigureMu.Lock()
		c.closed = true
		c.reconfigureMu.Unlock()
		c.closeErr = c.closePools(ctx)
		if c.waiter != nil {
			c.waiter.Close()
		}
		c.closeCaches()
		c.unregister()
	})
	return c.closeErr
}

// closeCaches cancels lookups that callers gave up on and waits for them.
func (c *Cluster) closeCaches() {
	c.images.Close()
	c.types.Close()
	c.servers.Close()
}

func (c *Cluster) closePools(ctx context.Context) error {
	var wg sync.WaitGroup
	pools := c.pools.Load().list
	errs := make([]error, len(pools))
	for i, p := range pools {
		wg.Go(func() { errs[i] = p.Close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
