package hcloudscale

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/actionwait"
)

// Version is the hcloudscale version sent in the User-Agent. Release builds
// set it with -ldflags "-X github.com/hcloudscale/hcloudscale.Version=v1.2.3";
// otherwise it is the module version from the build information.
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/hcloudscale/hcloudscale" && dep.Version != "" {
				return dep.Version
			}
		}
		if bi.Main.Path == "github.com/hcloudscale/hcloudscale" && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "(devel)"
}

// Option configures [New]. Options carry the code-only dependencies; the
// serialisable settings are in config.Config.
type Option func(*options)

type options struct {
	logger            *zap.Logger
	registerer        prometheus.Registerer
	clock             clock.Clock
	transport         http.RoundTripper
	clientOptions     []hcloud.ClientOption
	appName           string
	appVersion        string
	requestTimeout    time.Duration
	pollInterval      time.Duration
	listTTL           time.Duration
	createConcurrency int
	deleteConcurrency int
	unavailableTTL    time.Duration // 0: pool.DefaultUnavailableTTL
	spreadGrace       time.Duration // 0: pool.DefaultSpreadGrace
	rateLimitReserve  int
	lenient           bool
	noResume          bool
	resumeWhen        func() bool
	reloadPath        string
	reloadLoad        LoadFunc
	reloadInterval    time.Duration
	fence             Fence
}

func defaultOptions() options {
	return options{
		logger:            zap.NewNop(),
		clock:             clock.RealClock{},
		appName:           "hcloudscale",
		appVersion:        version(),
		requestTimeout:    DefaultRequestTimeout,
		pollInterval:      DefaultPollInterval,
		listTTL:           DefaultListTTL,
		createConcurrency: DefaultCreateConcurrency,
		deleteConcurrency: DefaultDeleteConcurrency,
		rateLimitReserve:  -1,
		reloadInterval:    DefaultReloadInterval,
	}
}

// Defaults of [New].
const (
	// DefaultRequestTimeout bounds one HTTP request to the API once it is
	// sent, so a hung connection cannot stall the autoscaler loop.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultPollInterval is the shortest time between two polls of the
	// in-flight actions of all pools, which are polled together.
	DefaultPollInterval = actionwait.DefaultPollInterval
	// DefaultListTTL is the base time between two server listings; it grows
	// with the number of listing pages to stay inside the API budget.
	DefaultListTTL = time.Minute
	// DefaultCreateConcurrency bounds the concurrent create flows per pool.
	DefaultCreateConcurrency = 10
	// DefaultDeleteConcurrency bounds the concurrent deletes per pool.
	DefaultDeleteConcurrency = 10
)

// WithLogger sets the logger; the default discards everything. API traffic
// is logged, with secrets redacted, at debug level.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithRegisterer registers the metrics of the pools, the rate-limit budget
// and hcloud-go's hcloud_api_* request metrics. A second Cluster on the same
// registerer reuses the collectors.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithClock replaces the wall clock where the Cluster reads time or
// waits: the TTLs of the server listing, the server-type catalogue, the
// image resolver and unavailable offerings, the age at which a server
// still initializing counts as a failed creation, the action waiter's
// polls, the rate-limit pacer's waits and the backoffs between repeated
// requests. A test that gives one k8s.io/utils/clock/testing.FakeClock to
// the Cluster and to hcloudtest.WithClock moves all of them, and the fake
// API's actions, with FakeClock.Step. Context deadlines stay on the wall
// clock: the request timeout and a create flow's overall deadline
// (the creation timeout). A nil clock keeps the wall clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithTransport sets the HTTP transport under the pacer and the debug log,
// for example to add a proxy or client certificates. With [WithFence] it
// must be an *http.Transport (New refuses another): writes go over a clone
// of it with HTTP/2 off, whose connections check the permit at each write;
// a write over a connection that cannot be checked (a SOCKS proxy's) is
// refused. HTTP and HTTPS proxies are covered.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) { o.transport = rt }
}

// WithClientOptions appends options to the hcloud-go client, after the ones
// New sets; tests use it for short retry and poll backoffs.
func WithClientOptions(opts ...hcloud.ClientOption) Option {
	return func(o *options) { o.clientOptions = append(o.clientOptions, opts...) }
}

// WithApplication sets the application name and version in the User-Agent,
// "hcloudscale" and [Version] by default.
func WithApplication(name, version string) Option {
	return func(o *options) { o.appName, o.appVersion = name, version }
}

// WithRequestTimeout bounds one HTTP request ([DefaultRequestTimeout]),
// from the moment it is sent until its answer has been read. The time the
// rate-limit pacer holds a request back (at most a minute) does not count
// against it; the caller's context bounds that.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.requestTimeout = d
		}
	}
}

// WithPollInterval sets the shortest time between two polls of in-flight
// actions ([DefaultPollInterval]); the action waiter's other times are
// multiples of it (see package actionwait).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.pollInterval = d
		}
	}
}

// WithListTTL sets the base time between server listings ([DefaultListTTL]).
func WithListTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.listTTL = d
		}
	}
}

// WithUnavailableTTL sets how long a capacity error keeps an offering
// sold out ([pool.DefaultUnavailableTTL]): no scale-up of it, and in a
// pool of several offerings its max at its size, until then.
func WithUnavailableTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.unavailableTTL = d
		}
	}
}

// WithSpreadGrace sets how long a spread placement group that a pool with
// spreadGroups created stays empty before the pool deletes it
// ([pool.DefaultSpreadGrace]). A longer grace keeps a group for the next
// scale-up; a shorter one frees the project's places (Hetzner allows 50
// placement groups) sooner. A grace of 0 or less keeps the default.
func WithSpreadGrace(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.spreadGrace = d
		}
	}
}

// WithConcurrency bounds the concurrent create flows and deletes per pool.
func WithConcurrency(creates, deletes int) Option {
	return func(o *options) {
		if creates > 0 {
			o.createConcurrency = creates
		}
		if deletes > 0 {
			o.deleteConcurrency = deletes
		}
	}
}

// WithRateLimitReserve keeps n requests of the project's hourly budget for
// the other tools that share it (cloud controller manager, CSI driver,
// Terraform). The default is 5% of the budget.
func WithRateLimitReserve(n int) Option {
	return func(o *options) { o.rateLimitReserve = max(n, 0) }
}

// WithLenientChecks makes New report a pool's server type that does not
// exist or is not offered in its location, and a missing image, as
// warnings instead of errors (a sold-out type and a placement group short
// of room are warnings in any case), so that tools can inspect and clean up a
// cluster whose offer has changed. Scale-ups of such a pool fail, with the
// error classified as usual. Missing references (network, firewalls, SSH
// keys, placement groups, subnets) stay errors: servers must never be
// created without them.
func WithLenientChecks() Option {
	return func(o *options) { o.lenient = true }
}

// WithoutResume makes the Cluster leave unfinished create flows alone:
// New and Refresh then do not call [pool.Pool.Resume]. For tools that
// only inspect a cluster (status, validate) while the autoscaler that owns
// the flows runs elsewhere.
func WithoutResume() Option {
	return func(o *options) { o.noResume = true }
}

// WithResumeWhen makes New and Refresh resume unfinished create flows
// only while leads returns true: for one of several replicas of which only
// the leader may change servers. A replica that becomes the leader calls
// [Cluster.RefreshNow] and then [Cluster.Resume]. [WithoutResume] wins
// over it.
func WithResumeWhen(leads func() bool) Option {
	return func(o *options) { o.resumeWhen = leads }
}
