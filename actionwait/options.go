package actionwait

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Waiter defaults. The waiter's other times are multiples of the poll
// interval, so that a shorter interval (tests use 1 ms) shortens them all.
const (
	// DefaultPollInterval is hcloud-go's own poll interval. No action is
	// polled more often, and no two polls come closer together.
	DefaultPollInterval = 500 * time.Millisecond
	// actionsPerRequest is the API's largest page: with as many IDs as
	// fit on one page, one GET /actions answers 50 actions. hcloud-go's
	// WaitForFunc sends 25 per request and leaves the page size unset.
	actionsPerRequest = 50
	// PriorIntervals is the prior: before the waiter has seen an action
	// of a command finish, it expects one to take this many poll
	// intervals (2 s by default), about the fastest an action runs.
	PriorIntervals = 4
	// MaxGapIntervals bounds the time between two polls of an action
	// that runs longer than expected (10 intervals, 5 s by default).
	MaxGapIntervals = 10
	// maxEstimateIntervals caps a learned duration (30 s by default), so
	// that an action faster than the ones before is seen within that.
	maxEstimateIntervals = 60
	// learnedSamples is how many recent durations of a kind of action
	// the waiter keeps; it expects the shortest of them.
	learnedSamples = 8
	// pollTimeout bounds one poll request, so that a hung connection
	// holds back the actions it asked for no longer than that.
	pollTimeout = 30 * time.Second
)

// Option configures a [Waiter].
type Option func(*Waiter)

// WithPollInterval sets the shortest time between two polls
// ([DefaultPollInterval]); the waiter's other times are multiples of it.
// Values of zero or less are ignored.
func WithPollInterval(d time.Duration) Option {
	return func(w *Waiter) {
		if d > 0 {
			w.interval = d
		}
	}
}

// WithClock sets the clock that tells the time and schedules the
// polls (default: the wall clock). A k8s.io/utils/clock/testing.FakeClock
// that also drives hcloudtest's fake API moves its actions and the polls
// with one Step.
func WithClock(c clock.Clock) Option {
	return func(w *Waiter) {
		if c != nil {
			w.clock = c
		}
	}
}

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option {
	return func(w *Waiter) {
		if l != nil {
			w.log = l
		}
	}
}

// WithRegisterer registers the waiter's metrics (the durations it
// observes, the polls per action and its poll requests) with reg,
// register-or-reuse as pool.WithRegisterer, so the waiter, the pools and the
// offerings of one Cluster share their collectors. Without it the waiter
// reports nowhere. A registration conflict on reg is logged, and the
// waiter then reports nowhere.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(w *Waiter) { w.registerer = reg }
}
