// Package metrics defines hcloudscale's own Prometheus metrics. hcloud-go's
// hcloud_api_* metrics are registered by hcloud-go itself.
//
// A [Set] is registered through an injected prometheus.Registerer, never a
// global one. Registration is register-or-reuse: a second Set on the same
// registerer (two Clusters in one process, a test that builds several)
// shares the collectors of the first instead of failing, as hcloud-go's
// instrumentation does.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "hcloudscale"

// Label names.
const (
	LabelPool       = "pool"
	LabelState      = "state"
	LabelResult     = "result"
	LabelCode       = "code"
	LabelServerType = "server_type"
	LabelLocation   = "location"
	LabelCommand    = "command"
)

// Values of the result label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// CreateDurationBuckets spans a fast system-image create (seconds) to a
// large snapshot that hits the default 5-minute creation timeout.
var CreateDurationBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 600}

// ActionDurationBuckets spans a power action (about a second) to a create
// from a large snapshot.
var ActionDurationBuckets = []float64{0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 120, 300}

// ActionPollBuckets counts the polls of one action: 1 is the floor.
var ActionPollBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30}

// Set holds the collectors. The zero value is not usable; build one with
// [New]. All collectors are safe for concurrent use.
type Set struct {
	// PoolTargetSize is per node group: existing servers not being
	// deleted plus pending claims.
	PoolTargetSize *prometheus.GaugeVec
	// Bounds reports the min and max size of every node group and pool,
	// read at scrape time.
	Bounds *Bounds
	// PoolInstances counts a pool's instances by state (running,
	// creating, deleting, failed: a placeholder or a server reported with
	// an error).
	PoolInstances *prometheus.GaugeVec
	// PoolPendingClaims counts the claims of a pool whose server is not
	// running yet, failed placeholders excluded.
	PoolPendingClaims *prometheus.GaugeVec
	// ServerCreates and ServerDeletes count finished create flows and
	// delete requests by result and Hetzner error code ("" on success).
	ServerCreates *prometheus.CounterVec
	ServerDeletes *prometheus.CounterVec
	// ServerCreateDuration is the time from the claim (the scale-up
	// request) until the server runs.
	ServerCreateDuration *prometheus.HistogramVec
	// UnavailableOfferings is 1 while a (server type, location) pair is
	// remembered as sold out after a capacity error.
	UnavailableOfferings *prometheus.GaugeVec
	// PlacementGroupLimit counts the spread groups a pool could not
	// create because the project holds as many placement groups as
	// Hetzner allows.
	PlacementGroupLimit *prometheus.CounterVec
	// ActionDuration is the duration of every successful action the
	// action waiter watched, by command: what it learns from.
	ActionDuration *prometheus.HistogramVec
	// ActionPolls is how often the waiter listed an action until it saw it
	// finished, by command; its sum over its count is the polls per
	// finished action.
	ActionPolls *prometheus.HistogramVec
	// ActionPollRequests counts the waiter's GET /actions requests (each
	// lists up to 50 actions).
	ActionPollRequests prometheus.Counter
}

// New builds a Set and registers it with reg. A nil reg gives a working
// Set that is registered nowhere, so callers never check for nil. A
// collector that reg already holds under the same name and labels is
// reused; any other registration conflict is an error.
func New(reg prometheus.Registerer) (*Set, error) {
	s := &Set{
		PoolTargetSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "pool", Name: "target_size",
			Help: "Target size of the pool: servers not being deleted plus pending claims.",
		}, []string{LabelPool}),
		Bounds: newBounds(),
		PoolInstances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "pool", Name: "instances",
			Help: "Instances of the pool by state (running, creating, deleting, failed).",
		}, []string{LabelPool, LabelState}),
		PoolPendingClaims: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "pool", Name: "pending_claims",
			Help: "Requested servers of the pool that are not running yet, failed ones excluded.",
		}, []string{LabelPool}),
		ServerCreates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "server", Name: "creates_total",
			Help: "Finished server create flows by result and Hetzner error code.",
		}, []string{LabelPool, LabelResult, LabelCode}),
		ServerDeletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "server", Name: "deletes_total",
			Help: "Server deletes by result and Hetzner error code.",
		}, []string{LabelPool, LabelResult, LabelCode}),
		ServerCreateDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "server", Name: "create_duration_seconds",
			Help:    "Time from the scale-up request until the server runs.",
			Buckets: CreateDurationBuckets,
		}, []string{LabelPool}),
		UnavailableOfferings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "unavailable_offerings",
			Help: "1 while a server type is remembered as unavailable in a location after a capacity error.",
		}, []string{LabelServerType, LabelLocation}),
		PlacementGroupLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "placement_group_limit_total",
			Help: "Spread placement groups a pool needed but could not create: the project is at Hetzner's limit of placement groups.",
		}, []string{LabelPool}),
		ActionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "action", Name: "duration_seconds",
			Help:    "Duration of the successful actions the action waiter watched, by command.",
			Buckets: ActionDurationBuckets,
		}, []string{LabelCommand}),
		ActionPolls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "action", Name: "polls",
			Help:    "Polls of an action until the action waiter saw it finished, by command.",
			Buckets: ActionPollBuckets,
		}, []string{LabelCommand}),
		ActionPollRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "action", Name: "poll_requests_total",
			Help: "GET /actions requests of the action waiter.",
		}),
	}
	if reg == nil {
		return s, nil
	}
	var errs []error
	register(reg, &s.PoolTargetSize, &errs)
	register(reg, &s.Bounds, &errs)
	register(reg, &s.PoolInstances, &errs)
	register(reg, &s.PoolPendingClaims, &errs)
	register(reg, &s.ServerCreates, &errs)
	register(reg, &s.ServerDeletes, &errs)
	register(reg, &s.ServerCreateDuration, &errs)
	register(reg, &s.UnavailableOfferings, &errs)
	register(reg, &s.PlacementGroupLimit, &errs)
	register(reg, &s.ActionDuration, &errs)
	register(reg, &s.ActionPolls, &errs)
	register(reg, &s.ActionPollRequests, &errs)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// register registers *c, or replaces *c with the collector reg already
// holds for it.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C, errs *[]error) {
	err := reg.Register(*c)
	if err == nil {
		return
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			*c = existing
			return
		}
		err = fmt.Errorf("registered collector has type %T, want %T", are.ExistingCollector, *c)
	}
	*errs = append(*errs, fmt.Errorf("registering metric: %w", err))
}

// ForgetPool drops every series of the pool, for a pool that is closed,
// so that a removed pool does not keep reporting its last values.
func (s *Set) ForgetPool(pool string) {
	labels := prometheus.Labels{LabelPool: pool}
	s.PoolTargetSize.DeletePartialMatch(labels)
	s.PoolInstances.DeletePartialMatch(labels)
	s.PoolPendingClaims.DeletePartialMatch(labels)
	s.PlacementGroupLimit.DeletePartialMatch(labels)
}
