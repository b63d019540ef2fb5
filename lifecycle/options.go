package lifecycle

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/nodecache"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// Option configures a Controller.
type Option func(*options)

type options struct {
	log      *zap.Logger
	reg      prometheus.Registerer
	clock    clock.WithTicker
	interval time.Duration
	dryRun   bool
	leads    func() bool
	lead     func() context.Context
	drain    nodedrain.Options
	recorder record.EventRecorder
	nodes    *nodecache.Cache
	// deletes says which pools RollBack may delete servers of; nil: all.
	deletes func(pool string) bool
}

func defaults() options {
	return options{log: zap.NewNop(), clock: clock.RealClock{}, interval: DefaultInterval, leads: func() bool { return true },
		lead: context.Background}
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l.Named("lifecycle")
		}
	}
}

// WithRollBackDeletes limits the servers RollBack deletes to the pools for
// which in reports true: a replacement of another pool is rolled back
// without a delete (its old node serves again, the replacement is kept
// without its scale-down protection), and is never finished. For a tool
// whose scope is some pools only (cleanup of some pools, beside pools it
// must not touch).
func WithRollBackDeletes(in func(pool string) bool) Option {
	return func(o *options) { o.deletes = in }
}

// WithRegisterer registers the lifecycle's metrics with reg.
func WithRegisterer(reg prometheus.Registerer) Option { return func(o *options) { o.reg = reg } }

// WithClock replaces the wall clock (tests).
func WithClock(c clock.WithTicker) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithInterval sets the time between two steps of Run (DefaultInterval).
func WithInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.interval = d
		}
	}
}

// WithDryRun makes Step plan, log and count only: nothing is created,
// cordoned, evicted or deleted.
func WithDryRun(dry bool) Option { return func(o *options) { o.dryRun = dry } }

// WithLeader makes Step act only while leads reports true (the process
// holds the leader Lease); otherwise Step stops the drains it runs and
// returns nil. A drain also asks it before each eviction.
func WithLeader(leads func() bool) Option {
	return func(o *options) {
		if leads != nil {
			o.leads = leads
		}
	}
}

// WithLeaderContext makes every Kubernetes write of the Controller
// (evictions, cordons, annotations) run under the context lead returns:
// one that ends the moment this process stops leading, nil or ended
// while it does not lead. Step acts only while it lives, and the drains
// a Step started stop as soon as it ends, without waiting for the next
// Step. It may be given with WithLeader, which is also asked before
// each eviction.
func WithLeaderContext(lead func() context.Context) Option {
	return func(o *options) {
		if lead != nil {
			o.lead = lead
		}
	}
}

// WithDrainOptions sets the backoff and poll of drains (their timeout is
// the pool's drainTimeout).
func WithDrainOptions(d nodedrain.Options) Option { return func(o *options) { o.drain = d } }

// WithEventRecorder records Kubernetes Events on the nodes the lifecycle
// acts on.
func WithEventRecorder(r record.EventRecorder) Option { return func(o *options) { o.recorder = r } }

// WithNodeCache has Run read the Nodes from a cache that its owner starts
// and stops (serve shares one with the node labeller); without it Run
// keeps a cache of its own.
func WithNodeCache(c *nodecache.Cache) Option { return func(o *options) { o.nodes = c } }
