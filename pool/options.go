package pool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Defaults of the options.
const (
	defaultCreateConcurrency = 10
	defaultDeleteConcurrency = 10
	// defaultCreateAttempts bounds how often one claim sends its create
	// request after transient failures (on top of hcloud-go's own
	// retries).
	defaultCreateAttempts = 3
	// deleteAttempts bounds how often one delete request is sent after
	// it failed on the way and the server is still there.
	deleteAttempts = 3
	// defaultRetryBackoff is the first wait before a repeated request; it
	// doubles per attempt.
	defaultRetryBackoff = time.Second
	// defaultCleanupAttempts bounds the deletes of a server whose create
	// flow failed.
	defaultCleanupAttempts = 4
	// cleanupTimeout bounds the clean-up of one failed server, delete
	// requests and the wait for their action together.
	cleanupTimeout = 2 * time.Minute
	// lookupTimeout bounds the look-up of a server after a create
	// request with an unknown outcome.
	lookupTimeout = 30 * time.Second
	// deleteRequestTimeout bounds a delete request once it is sent, with
	// its retries by hcloud-go and the pacer's wait, whatever the
	// caller's deadline: its outcome must be known before it is
	// reported.
	deleteRequestTimeout = 2 * time.Minute
	// deleteWaitTimeout bounds the background wait for delete actions.
	deleteWaitTimeout = 5 * time.Minute
)

// Option configures a [Pool].
type Option func(*options)

type options struct {
	logger            *zap.Logger
	clock             clock.Clock
	createConcurrency int
	deleteConcurrency int
	unavailableTTL    time.Duration
	creationTimeout   time.Duration
	createAttempts    int
	cleanupAttempts   int
	deleteAttempts    int
	retryBackoff      time.Duration
	registerer        prometheus.Registerer
	offerings         *Offerings
	family            *Family
	clusterName       string
	spreadGrace       time.Duration
}

// WithSpreadGrace sets how long a spread group the pool created stays
// empty before it is deleted (DefaultSpreadGrace); 0 deletes it at the
// second sweep that finds it empty. A negative grace is an error of New.
func WithSpreadGrace(d time.Duration) Option {
	return func(o *options) { o.spreadGrace = d }
}

// WithLogger sets the logger; the pool logs as "pool" with a pool field.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithClock sets the clock (default: the wall clock): the age at which a
// server still initializing counts as a failed creation, the creation
// timeouts of adopted servers and the memory of unavailable offerings
// read it, and the backoffs between repeated requests wait on it. The
// deadline of a create flow as a whole (WithCreationTimeout) is a context
// deadline, on the wall clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithCreateConcurrency bounds the create-side requests (create, attach,
// power on) of the pool in flight at once (default 10). Waiting for
// actions is not bounded by it: the shared [actionwait.Waiter] does that.
func WithCreateConcurrency(n int) Option {
	return func(o *options) { o.createConcurrency = n }
}

// WithDeleteConcurrency bounds the pool's delete requests in flight at
// once (default 10).
func WithDeleteConcurrency(n int) Option {
	return func(o *options) { o.deleteConcurrency = n }
}

// WithCreationTimeout bounds each server's create flow, from the claim to
// a running server (default: the pool's config, else 5 minutes).
func WithCreationTimeout(d time.Duration) Option {
	return func(o *options) { o.creationTimeout = d }
}

// WithRegisterer registers the pool's metrics with reg (register-or-reuse,
// so pools can share one registerer). Without it the pool reports nowhere.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithOfferings shares a registry of unavailable offerings between pools:
// a capacity error in one pool then stops the others that ask for the
// same server type in the same location. By default each pool has its
// own.
func WithOfferings(r *Offerings) Option {
	return func(o *options) { o.offerings = r }
}

// WithUnavailableTTL sets how long a capacity error keeps the pool's
// offering marked unavailable, so that IncreaseSize fails at once
// ([DefaultUnavailableTTL]). Zero disables the memory.
func WithUnavailableTTL(d time.Duration) Option {
	return func(o *options) { o.unavailableTTL = d }
}

// WithFamily makes the pool one node group of a pool of several
// offerings (config.Pool.OfferingGroups): f joins the groups of the
// configured pool, named cfg.FamilyName(), which share its servers, min
// and max (see [Family]). Without it the pool is a family of its own.
func WithFamily(f *Family) Option {
	return func(o *options) { o.family = f }
}

// WithClusterName names the cluster the pool belongs to. The pool's server
// labels must carry it (config.LabelCluster), and a server found under a
// claim's name is adopted only if it carries it too.
func WithClusterName(name string) Option {
	return func(o *options) { o.clusterName = name }
}
