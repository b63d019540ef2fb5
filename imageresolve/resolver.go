package imageresolve

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/config"
)

// Defaults of the options.
const (
	DefaultTTL           = 5 * time.Minute
	DefaultNegativeTTL   = 30 * time.Second
	DefaultLookupTimeout = 30 * time.Second
	// DefaultMaxStale bounds how old a resolved image may be when failed
	// lookups leave no newer one (see [WithMaxStale]).
	DefaultMaxStale = 24 * time.Hour
	// staleRetry is how long a stale image is used after a failed lookup
	// before the next lookup is tried.
	staleRetry = 30 * time.Second
)

// ImageAPI is the part of hcloud-go's image client the resolver uses.
// List rather than AllWithOpts serves label selectors, because the resolver
// needs only the newest match and one page of one image costs one request
// however many snapshots carry the labels.
type ImageAPI interface {
	GetByID(ctx context.Context, id int64) (*hcloud.Image, *hcloud.Response, error)
	GetByNameAndArchitecture(ctx context.Context, name string, arch hcloud.Architecture) (*hcloud.Image, *hcloud.Response, error)
	List(ctx context.Context, opts hcloud.ImageListOpts) ([]*hcloud.Image, *hcloud.Response, error)
}

var _ ImageAPI = (*hcloud.ImageClient)(nil)

// Option configures a [Resolver].
type Option func(*Resolver)

// WithTTL sets how long a resolved image is reused; a new snapshot matching
// a label selector is picked up once it expires. d <= 0 turns the cache off
// (concurrent lookups are still coalesced). Default [DefaultTTL].
func WithTTL(d time.Duration) Option {
	return func(r *Resolver) { r.ttl = d }
}

// WithNegativeTTL sets how long "not found" and "wrong architecture" are
// reused. It is short so that a freshly uploaded image is found soon, yet
// it keeps a misconfigured pool that the autoscaler retries every loop from
// costing up to three requests each time. Failed requests are never cached.
// d <= 0 turns it off. Default [DefaultNegativeTTL].
func WithNegativeTTL(d time.Duration) Option {
	return func(r *Resolver) { r.negativeTTL = d }
}

// WithMaxStale bounds the age of a stale image. When a lookup after the
// TTL fails (a failed request, not "not found"), the image resolved
// before is used again, and looked up again every 30 seconds, until it was
// resolved more than d ago; then the lookup's error is returned. d <= 0
// keeps [DefaultMaxStale].
func WithMaxStale(d time.Duration) Option {
	return func(r *Resolver) {
		if d > 0 {
			r.maxStale = d
		}
	}
}

// WithLookupTimeout bounds one lookup (all of its requests). A lookup runs on
// after the caller that started it gives up, for the callers that share it,
// so it needs a bound of its own. d <= 0 keeps [DefaultLookupTimeout].
func WithLookupTimeout(d time.Duration) Option {
	return func(r *Resolver) {
		if d > 0 {
			r.lookupTimeout = d
		}
	}
}

// WithClock sets the clock for cache expiry. Default: the system clock.
func WithClock(c clock.Clock) Option {
	return func(r *Resolver) {
		if c != nil {
			r.clock = c
		}
	}
}

// WithLogger sets the logger; the resolver logs under the name
// "imageresolve". Default: [zap.NewNop].
func WithLogger(l *zap.Logger) Option {
	return func(r *Resolver) {
		if l != nil {
			r.log = l
		}
	}
}

// Resolver turns image specs into images, with a cache and coalesced
// lookups. It is safe for concurrent use. Call Close to stop lookups still
// running for callers that gave up.
type Resolver struct {
	api           ImageAPI
	ttl           time.Duration
	negativeTTL   time.Duration
	maxStale      time.Duration
	lookupTimeout time.Duration
	clock         clock.Clock
	log           *zap.Logger

	flights singleflight.Group
	wg      sync.WaitGroup // counts running lookups; Add only under mu while !closed

	// mu guards everything below.
	mu sync.Mutex
	// cache keeps one entry per spec and arch; specs come from the
	// configuration, so it stays as small as the number of pools. An
	// expired entry with an image stays as the stale fallback.
	cache  map[cacheKey]entry
	gen    uint64 // bumped by Invalidate; results of older lookups are dropped
	warned map[int64]struct{}
	// cancels stops running lookups on Close, keyed by a lookup number.
	cancels map[uint64]context.CancelFunc
	nextID  uint64
	closed  bool
}

type cacheKey struct {
	spec config.ImageSpec
	arch config.Arch
}

type entry struct {
	img     *Image // nil when err is set
	err     error
	expires time.Time
	// resolved is when img was last looked up successfully; staleSince
	// is when a failed lookup first made it serve stale, zero while fresh.
	resolved   time.Time
	staleSince time.Time
}

// New returns a Resolver over api, typically &client.Image of an
// hcloud.Client. It does no I/O.
func New(api ImageAPI, opts ...Option) *Resolver {
	r := &Resolver{
		api:           api,
		ttl:           DefaultTTL,
		negativeTTL:   DefaultNegativeTTL,
		maxStale:      DefaultMaxStale,
		lookupTimeout: DefaultLookupTimeout,
		clock:         clock.RealClock{},
		log:           zap.NewNop(),
		cache:         make(map[cacheKey]entry),
		warned:        make(map[int64]struct{}),
		cancels:       make(map[uint64]context.CancelFunc),
	}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.Named("imageresolve")
	return r
}

// Resolve returns the image spec names for arch: see the package
// documentation for the lookup order. The result comes from the cache while
// fresh. Concurrent calls for the same spec and arch share one lookup; a
// caller whose ctx ends stops waiting at once while the lookup goes on for
// the others.
func (r *Resolver) Resolve(ctx context.Context, spec config.ImageSpec, arch config.Arch) (*Image, error) {
	if spec == "" {
		return nil, &MissingSpecError{Arch: arch}
	}
	hArch, ok := hcloudArch(arch)
	if !ok {
		return nil, fmt.Errorf("image %q: %w", spec, &UnknownArchError{Arch: arch})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("image %q for arch %s: %w", spec, arch, err)
	}
	key := cacheKey{spec: spec, arch: arch}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	if e, ok := r.cache[key]; ok {
		if r.clock.Now().Before(e.expires) {
			r.mu.Unlock()
			return e.result()
		}
		if e.img == nil {
			delete(r.cache, key)
		}
	}
	gen := r.gen
	r.mu.Unlock()

	// The generation is part of the flight key so that callers arriving
	// after Invalidate start a fresh lookup instead of joining an old one.
	flight := strconv.FormatUint(gen, 10) + "\x00" + string(arch) + "\x00" + string(spec)
	ch := r.flights.DoChan(flight, func() (any, error) {
		return r.fetch(ctx, key, hArch, gen)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*Image).clone(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("image %q for arch %s: %w", spec, arch, context.Cause(ctx))
	}
}

func (e entry) result() (*Image, error) {
	if e.err != nil {
		return nil, e.err
	}
	return e.img.clone(), nil
}

// ResolvePool resolves the image of pool p for arch. p.Images already holds
// the outcome of the precedence (see [Select]); an empty entry is an error
// naming the pool and the architecture.
func (r *Resolver) ResolvePool(ctx context.Context, p *config.Pool, arch config.Arch) (*Image, error) {
	if p == nil {
		return nil, errors.New("resolve pool image: pool is nil")
	}
	if !knownArch(arch) {
		return nil, fmt.Errorf("pool %q: %w", p.Name, &UnknownArchError{Arch: arch})
	}
	spec := p.Images.ForArch(arch)
	if spec == "" {
		return nil, &MissingSpecError{Pool: p.Name, Arch: arch}
	}
	img, err := r.Resolve(ctx, spec, arch)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", p.Name, err)
	}
	return img, nil
}

// Forget drops every cached result that resolved to image id, fresh or
// stale, so that the next Resolve of those specs asks the API. Call it
// when the API refuses the image, for example because a snapshot was
// deleted. It reports whether anything was dropped.
func (r *Resolver) Forget(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	dropped := false
	for k, e := range r.cache {
		if e.img != nil && e.img.ID == id {
			delete(r.cache, k)
			dropped = true
		}
	}
	if dropped {
		// A lookup in flight may still store the image it found.
		r.gen++
	}
	return dropped
}

// StaleSince returns since when the oldest image in use has been served
// stale because lookups failed; zero when none is.
func (r *Resolver) StaleSince() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var since time.Time
	for _, e := range r.cache {
		if !e.staleSince.IsZero() && (since.IsZero() || e.staleSince.Before(since)) {
			since = e.staleSince
		}
	}
	return since
}

// Invalidate forgets every cached result, so the next Resolve asks the API.
// Lookups already running finish for their callers but are not cached.
func (r *Resolver) Invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	clear(r.cache)
}

// Close cancels running lookups, waits for them to end and makes later
// calls of Resolve fail with [ErrClosed]. It is safe to call more than once.
func (r *Resolver) Close() {
	r.mu.Lock()
	r.closed = true
	for _, cancel := range r.cancels {
		cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// fetch runs one shared lookup and caches its result. It runs on
// singleflight's goroutine, so it outlives a caller that gives up: its
// context keeps the first caller's values but not its cancellation, and
// has a deadline of its own.
func (r *Resolver) fetch(callerCtx context.Context, key cacheKey, hArch hcloud.Architecture, gen uint64) (*Image, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(callerCtx), r.lookupTimeout)
	defer cancel()
	untrack, err := r.track(cancel)
	if err != nil {
		return nil, err
	}
	defer untrack()

	start := r.clock.Now()
	img, err := r.lookup(ctx, key.spec, key.arch, hArch)
	now := r.clock.Now()
	res := r.store(key, gen, lookupResult{img: img, err: err, start: start, now: now})
	res.log(r.log.With(zap.String("spec", string(key.spec)), zap.String("arch", string(key.arch))))
	if res.err != nil {
		return nil, res.err
	}
	return res.img, nil
}

// track registers the cancel of a lookup, for Close to call; untrack
// forgets it when the lookup is done. It fails with ErrClosed after Close.
func (r *Resolver) track(cancel context.CancelFunc) (untrack func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	id := r.nextID
	r.nextID++
	r.cancels[id] = cancel
	r.wg.Add(1)
	return func() {
		r.mu.Lock()
		delete(r.cancels, id)
		r.mu.Unlock()
		r.wg.Done()
	}, nil
}

// lookupResult is a lookup's outcome as fetch returns and logs it.
type lookupResult struct {
	img        *Image
	err        error
	start, now time.Time // when the lookup started and ended
	// staleErr is the failure of a lookup answered with the image
	// resolved before (at staleResolved).
	staleErr       error
	staleResolved  time.Time
	warnDeprecated bool // the image is deprecated and not warned about yet
}

// store caches the outcome of a lookup begun at generation gen, unless
// Invalidate came since, and returns what the caller gets: a failure that
// is not definitive is answered with the image resolved before while that
// is at most maxStale old.
func (r *Resolver) store(key cacheKey, gen uint64, res lookupResult) lookupResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := res.now
	if r.gen == gen {
		old, hadOld := r.cache[key]
		switch err := res.err; {
		case err == nil && r.ttl > 0:
			r.cache[key] = entry{img: res.img, expires: now.Add(r.ttl), resolved: now}
		case err == nil:
			delete(r.cache, key)
		case definitive(err) && r.negativeTTL > 0:
			r.cache[key] = entry{err: err, expires: now.Add(r.negativeTTL)}
		case definitive(err):
			delete(r.cache, key)
		case hadOld && old.img != nil && now.Sub(old.resolved) <= r.maxStale:
			// Stale but good: the image resolved before serves until the
			// next try, unless the lookup was only cut short by Close.
			if !r.closed {
				if old.staleSince.IsZero() {
					old.staleSince = res.start
				}
				old.expires = now.Add(min(staleRetry, r.ttl))
				r.cache[key] = old
				res.staleErr, res.staleResolved = err, old.resolved
				res.img, res.err = old.img, nil
			}
		case hadOld:
			delete(r.cache, key)
		}
	}
	if res.err == nil && res.img.Deprecated {
		if _, done := r.warned[res.img.ID]; !done {
			r.warned[res.img.ID] = struct{}{}
			res.warnDeprecated = true
		}
	}
	return res
}

// log logs the outcome: a failure at debug level, a stale answer and a
// deprecated image's first use as warnings.
func (res *lookupResult) log(log *zap.Logger) {
	took := zap.Duration("took", res.now.Sub(res.start))
	switch {
	case res.err != nil:
		log.Debug("image lookup failed", zap.Error(res.err), took)
		return
	case res.staleErr != nil:
		log.Warn("image lookup failed; using the image resolved before until a lookup succeeds",
			zap.Int64("image_id", res.img.ID), zap.Time("resolved", res.staleResolved), zap.Error(res.staleErr))
		return
	}
	log.Debug("image resolved", zap.Int64("image_id", res.img.ID), took)
	if res.warnDeprecated {
		fields := []zap.Field{zap.Int64("image_id", res.img.ID), zap.String("image_name", res.img.Name)}
		if !res.img.UnavailableAfter.IsZero() {
			fields = append(fields, zap.Time("unavailable_after", res.img.UnavailableAfter))
		}
		log.Warn("image is deprecated; servers still get it until Hetzner removes it", fields...)
	}
}
