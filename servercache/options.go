package servercache

import (
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Defaults of the options.
const (
	DefaultTTL     = 60 * time.Second
	DefaultTypeTTL = time.Hour
	// DefaultTypeMaxStale bounds how old a server-type catalogue may be
	// when a failed refresh leaves no newer one (see [WithMaxStale]).
	DefaultTypeMaxStale  = 24 * time.Hour
	DefaultJitter        = 0.1
	DefaultListingBudget = 180 // requests per hour: 5% of Hetzner's default 3,600
	DefaultListTimeout   = 2 * time.Minute
)

// Option configures a [Cache] or a [TypeCatalog]. Options that make sense
// for only one of them say so; the other ignores them.
type Option func(*options)

type options struct {
	clusterName string
	ttl         time.Duration // 0: the constructor's default
	jitter      float64
	budget      int
	listTimeout time.Duration
	maxStale    time.Duration
	rand        func() float64
	clock       clock.Clock
	logger      *zap.Logger
}

func newOptions(opts []Option) options {
	o := options{
		jitter:      DefaultJitter,
		budget:      DefaultListingBudget,
		listTimeout: DefaultListTimeout,
		maxStale:    DefaultTypeMaxStale,
		rand:        rand.Float64,
		clock:       clock.RealClock{},
		logger:      zap.NewNop(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClusterName scopes the [Cache] to the servers labelled
// config.LabelCluster=name, so that clusters sharing a project never see
// each other's servers. Empty means servers without a cluster label
// (those of named clusters are excluded). The name must be a
// valid label value, which config validates. TypeCatalog ignores it.
func WithClusterName(name string) Option {
	return func(o *options) { o.clusterName = name }
}

// WithTTL sets how long a listing stays fresh before jitter: DefaultTTL for
// a [Cache], DefaultTypeTTL for a [TypeCatalog]. A non-positive TTL keeps
// the default.
func WithTTL(ttl time.Duration) Option {
	return func(o *options) {
		if ttl > 0 {
			o.ttl = ttl
		}
	}
}

// WithListTimeout bounds one listing. A listing runs for every caller
// waiting on it, so it does not stop when the caller that started it gives
// up; this timeout is what stops it. The default, DefaultListTimeout,
// leaves room for the 200 pages of 10,000 servers. A non-positive value
// keeps the default.
func WithListTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.listTimeout = d
		}
	}
}

// WithMaxStale bounds the age of a stale [TypeCatalog]: after its TTL,
// a fetch that fails (or does not answer within a second) leaves the
// catalogue in memory in use, until it is older than d; then lookups fail
// with the fetch's error until one succeeds. The default is
// DefaultTypeMaxStale; a non-positive d keeps it. Cache ignores it: its
// Get reports a failed listing at once.
func WithMaxStale(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.maxStale = d
		}
	}
}

// WithClock replaces the system clock, which tells when a listing
// expires; tests step a k8s.io/utils/clock/testing.FakeClock through the
// TTLs. A nil clock keeps it.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithLogger sets the logger: routine listings at debug level, failures at
// warn. A nil logger keeps the default zap.NewNop().
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}
