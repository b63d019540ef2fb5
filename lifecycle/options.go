package lifecycle

import (
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
	drain    nodedrain.Options
	recorder record.EventRecorder
	nodes    *nodecache.Cache
}

func defaults() options {
	return options{log: zap.NewNop(), clock: clock.RealClock{}, interval: DefaultInterval, leads: func() bool { return true }}
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l.Named("lifecycle")
		}
	}
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
// returns nil.
func WithLeader(leads func() bool) Option {
	return func(o *options) {
		if leads != nil {
			o.leads = leads
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
