package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/internal/metrics"
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
	// pollTimeout bounds one poll request, so that a hung connection does
	// not stall every caller until its own deadline.
	pollTimeout = 30 * time.Second
)

// ErrWaiterClosed is returned by [Waiter.Wait] after [Waiter.Close].
var ErrWaiterClosed = errors.New("action waiter closed")

// ActionNotFoundError reports an action that the API no longer knows.
type ActionNotFoundError struct {
	ID int64
}

func (e *ActionNotFoundError) Error() string {
	return fmt.Sprintf("action %d not found", e.ID)
}

// WaiterOption configures a [Waiter].
type WaiterOption func(*Waiter)

// WithPollInterval sets the shortest time between two polls
// (DefaultPollInterval); the waiter's other times are multiples of it.
// Values of zero or less are ignored.
func WithPollInterval(d time.Duration) WaiterOption {
	return func(w *Waiter) {
		if d > 0 {
			w.interval = d
		}
	}
}

// WithWaiterClock sets the clock that tells the time and schedules the
// polls (default: the wall clock). A k8s.io/utils/clock/testing.FakeClock
// that also drives hcloudtest's fake API moves its actions and the polls
// with one Step.
func WithWaiterClock(c clock.Clock) WaiterOption {
	return func(w *Waiter) {
		if c != nil {
			w.clock = c
		}
	}
}

// WithWaiterLogger sets the logger (default: none).
func WithWaiterLogger(l *zap.Logger) WaiterOption {
	return func(w *Waiter) {
		if l != nil {
			w.log = l
		}
	}
}

// WithWaiterRegisterer registers the waiter's metrics (the durations it
// observes, the polls per action and its poll requests) with reg,
// register-or-reuse as [WithRegisterer], so the waiter, the pools and the
// offerings of one Cluster share their collectors. Without it the waiter
// reports nowhere. A registration conflict on reg is logged, and the
// waiter then reports nowhere.
func WithWaiterRegisterer(reg prometheus.Registerer) WaiterOption {
	return func(w *Waiter) { w.registerer = reg }
}

// withWaiterMetrics reports to m, for tests that read the collectors.
func withWaiterMetrics(m *metrics.Set) WaiterOption {
	return func(w *Waiter) { w.metrics = m }
}

// Waiter waits for Hetzner actions on behalf of every caller in the
// process: one goroutine lists the running actions of all callers
// together, actionsPerRequest IDs per GET /actions, and wakes each caller
// when its actions have finished. It polls an action when it can have
// finished, by the durations of the actions it watched before; the
// package documentation explains the schedule. Nothing is polled while
// nobody waits.
//
// Create one Waiter per process (per API project) and share it between
// pools; Close it after them.
type Waiter struct {
	api      ActionAPI
	interval time.Duration
	clock    clock.Clock
	log      *zap.Logger
	metrics  *metrics.Set
	// registerer is where NewWaiter registers metrics, unless set.
	registerer prometheus.Registerer
	pollHook   func(start time.Time) // tests only: called as a poll starts

	cancel context.CancelFunc // stops a poll in flight
	wake   chan struct{}      // capacity 1: "there may be new work"
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex // guards byID, learned, lastPoll and closed
	byID     map[int64]*tracked
	learned  map[learnKey][]time.Duration // the last learnedSamples durations, oldest first
	lastPoll time.Time
	closed   bool
}

// tracked is one running action and its callers.
type tracked struct {
	calls   []*waitCall
	command string
	class   string    // the caller's finer kind, such as server type and location
	since   time.Time // when it was first waited for
	next    time.Time // when it is polled next
	polls   int
}

// learnKey names a kind of action: a command, or a command within a
// class.
type learnKey struct {
	command, class string
}

// waitCall is one Wait call. Its fields are guarded by Waiter.mu until
// done is closed, and read-only afterwards.
type waitCall struct {
	remaining int
	errs      []error
	done      chan struct{}
}

// NewWaiter starts a Waiter that lists actions with api, usually
// (*hcloud.Client).Action. Close it to stop its goroutine.
func NewWaiter(api ActionAPI, opts ...WaiterOption) *Waiter {
	w := &Waiter{
		api:      api,
		interval: DefaultPollInterval,
		clock:    clock.RealClock{},
		log:      zap.NewNop(),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		byID:     make(map[int64]*tracked),
		learned:  make(map[learnKey][]time.Duration),
	}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	w.log = w.log.Named("waiter")
	if w.metrics == nil && w.registerer != nil {
		m, err := metrics.New(w.registerer)
		if err != nil {
			w.log.Warn("waiter metrics not registered", zap.Error(err))
		}
		w.metrics = m
	}
	if w.metrics == nil {
		w.metrics, _ = metrics.New(nil) // registered nowhere: cannot fail
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.loop(ctx)
	return w
}

// Wait blocks until every given action has finished, or ctx ends. It
// returns nil when all succeeded, and otherwise the failures joined: an
// hcloud.ActionError (with the action's code and message) per failed
// action, an [*ActionNotFoundError] per vanished one. nil actions are
// skipped. On cancellation the error wraps ctx.Err() and names the
// actions still running.
func (w *Waiter) Wait(ctx context.Context, actions ...*hcloud.Action) error {
	return w.WaitAs(ctx, "", actions...)
}

// WaitAs is [Waiter.Wait] for actions of a finer kind than their command,
// such as the creates of one server type in one location ("cx23/fsn1"):
// the waiter learns their durations per command and per command and
// class, and expects the finer figure where it has one.
func (w *Waiter) WaitAs(ctx context.Context, class string, actions ...*hcloud.Action) error {
	call := &waitCall{done: make(chan struct{})}
	var running []*hcloud.Action
	seen := make(map[int64]bool, len(actions))
	for _, a := range actions {
		if a == nil || seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		if a.Status != hcloud.ActionStatusRunning {
			if err := a.Error(); err != nil {
				call.errs = append(call.errs, err)
			}
			continue
		}
		running = append(running, a)
	}
	if len(running) == 0 {
		return errors.Join(call.errs...)
	}

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrWaiterClosed
	}
	now := w.clock.Now()
	call.remaining = len(running)
	for _, a := range running {
		t := w.byID[a.ID]
		if t == nil {
			t = &tracked{command: a.Command, class: class, since: now}
			t.next = now.Add(w.expectLocked(t.command, t.class))
			w.byID[a.ID] = t
		}
		t.calls = append(t.calls, call)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}

	select {
	case <-call.done:
		return errors.Join(call.errs...)
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-call.done: // finished while we took the lock
		return errors.Join(call.errs...)
	default:
	}
	var ids []int64
	for _, a := range running {
		t := w.byID[a.ID]
		if t == nil {
			continue
		}
		if i := slices.Index(t.calls, call); i >= 0 {
			ids = append(ids, a.ID)
			t.calls = slices.Delete(t.calls, i, i+1)
		}
		if len(t.calls) == 0 {
			delete(w.byID, a.ID)
		}
	}
	return fmt.Errorf("waiting for actions %v: %w", ids, ctx.Err())
}

// Expected returns how long the waiter expects an action of command (in
// class, if not empty) to run: the shortest of the recent durations it
// observed, or the prior when it has observed none.
func (w *Waiter) Expected(command, class string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expectLocked(command, class)
}

func (w *Waiter) expectLocked(command, class string) time.Duration {
	samples := w.learned[learnKey{command, class}]
	if len(samples) == 0 {
		samples = w.learned[learnKey{command, ""}]
	}
	if len(samples) == 0 {
		return PriorIntervals * w.interval
	}
	return min(slices.Min(samples), maxEstimateIntervals*w.interval)
}

// learnLocked records the duration of a finished action.
func (w *Waiter) learnLocked(t *tracked, d time.Duration) {
	keys := []learnKey{{t.command, ""}}
	if t.class != "" {
		keys = append(keys, learnKey{t.command, t.class})
	}
	for _, k := range keys {
		s := append(w.learned[k], d)
		if len(s) > learnedSamples {
			s = slices.Delete(s, 0, len(s)-learnedSamples)
		}
		w.learned[k] = s
	}
}

// Close stops polling and waits for the goroutine to end. Callers still
// waiting get [ErrWaiterClosed]. Close is idempotent.
func (w *Waiter) Close() {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.stop)
		w.cancel()
		<-w.done
		w.mu.Lock()
		defer w.mu.Unlock()
		for id, t := range w.byID {
			for _, c := range t.calls {
				w.finishLocked(c, ErrWaiterClosed)
			}
			delete(w.byID, id)
		}
	})
}

func (w *Waiter) loop(ctx context.Context) {
	defer close(w.done)
	for {
		w.mu.Lock()
		idle := len(w.byID) == 0
		var at, now time.Time
		if !idle {
			now = w.clock.Now()
			at = w.nextPollLocked()
		}
		w.mu.Unlock()
		if idle {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		if d := at.Sub(now); d > 0 {
			select {
			case <-w.clock.After(d):
			case <-w.wake:
				continue // a new action may be due sooner
			case <-w.stop:
				return
			}
		}
		w.poll(ctx, at)
	}
}

// nextPollLocked returns when to poll next: when the first action is due,
// or later by up to one interval to take along the others due by then
// (actions started together finish together), and never sooner than one
// interval after the last poll.
func (w *Waiter) nextPollLocked() time.Time {
	var first time.Time
	for _, t := range w.byID {
		if first.IsZero() || t.next.Before(first) {
			first = t.next
		}
	}
	at := first
	for _, t := range w.byID {
		if t.next.After(at) && !t.next.After(first.Add(w.interval)) {
			at = t.next
		}
	}
	if !w.lastPoll.IsZero() {
		if earliest := w.lastPoll.Add(w.interval); at.Before(earliest) {
			at = earliest
		}
	}
	return at
}

// poll lists every action due by at, one request per actionsPerRequest
// IDs, sent concurrently, and schedules the ones still running. The
// callers of the finished actions are woken as each request answers, so
// that a slow request holds back only the actions it asked for.
func (w *Waiter) poll(ctx context.Context, at time.Time) {
	w.mu.Lock()
	start := w.clock.Now()
	w.lastPoll = start
	if w.pollHook != nil {
		w.pollHook(start)
	}
	var ids []int64
	for id, t := range w.byID {
		if !t.next.After(at) {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	slices.Sort(ids)

	chunks := slices.Collect(slices.Chunk(ids, actionsPerRequest))
	running := make([][]*hcloud.Action, len(chunks))
	failed := make([]bool, len(chunks))
	finished := map[string]bool{} // commands of which this poll saw some finish; guarded by w.mu
	var wg sync.WaitGroup
	for i, chunk := range chunks {
		wg.Go(func() {
			actions, err := w.list(ctx, chunk)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("polling actions failed; retrying after the poll interval",
						zap.Int("actions", len(chunk)), zap.Error(err))
				}
				failed[i] = true
				return
			}
			running[i] = w.settle(chunk, actions, finished)
		})
	}
	wg.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.clock.Now()
	for i, chunk := range chunks {
		if failed[i] {
			for _, id := range chunk {
				if t := w.byID[id]; t != nil {
					t.polls++
					t.next = start.Add(w.interval)
				}
			}
			continue
		}
		for _, a := range running[i] {
			t := w.byID[a.ID]
			if t == nil {
				continue // its callers gave up while we polled
			}
			t.polls++
			// From the end of the poll: the progress may be read late in
			// the request, and later is the safe side.
			t.next = end.Add(w.gapLocked(t, a, end, finished[t.command]))
		}
	}
}

// settle settles the answer to one request of a
// poll: it wakes the callers of the finished and the vanished actions
// among ids, adds the commands of the finished ones to finished, and
// returns the actions still running.
func (w *Waiter) settle(ids []int64, actions []*hcloud.Action, finished map[string]bool) []*hcloud.Action {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.clock.Now()
	byID := make(map[int64]*hcloud.Action, len(actions))
	for _, a := range actions {
		if a != nil {
			byID[a.ID] = a
		}
	}
	var running []*hcloud.Action
	for _, id := range ids {
		a := byID[id]
		if a != nil && a.Status == hcloud.ActionStatusRunning {
			running = append(running, a)
			continue
		}
		t := w.byID[id]
		if t == nil {
			continue // its callers gave up while we polled
		}
		t.polls++
		if a == nil {
			w.log.Warn("action not found", zap.Int64("action", id))
			w.resolveLocked(id, &ActionNotFoundError{ID: id})
			continue
		}
		finished[t.command] = true
		w.finishedLocked(t, a, seen)
		w.resolveLocked(id, a.Error())
	}
	return running
}

// gapLocked returns how long to wait before polling a running action
// again: one interval while others of its command are finishing; else
// the time its progress says it still needs, or half the time it has run
// when the API reports no progress; never less than one interval or more
// than MaxGapIntervals.
func (w *Waiter) gapLocked(t *tracked, a *hcloud.Action, now time.Time, finishing bool) time.Duration {
	if finishing {
		return w.interval
	}
	age := now.Sub(t.since)
	gap := age / 2
	if a.Progress > 0 && a.Progress < 100 {
		gap = age * time.Duration(100-a.Progress) / time.Duration(a.Progress)
	}
	return min(max(gap, w.interval), MaxGapIntervals*w.interval)
}

// finishedLocked learns from a finished action and reports it. Its
// duration is the API's (finished minus started), but no more than the
// waiter saw pass since the first Wait, which guards against a skewed
// clock of the API; when the API's times are missing or impossible
// (finished before started), it is what the waiter saw. Failed actions
// teach nothing: failures can be quick.
func (w *Waiter) finishedLocked(t *tracked, a *hcloud.Action, seen time.Time) {
	w.metrics.ActionPolls.WithLabelValues(t.command).Observe(float64(t.polls))
	if a.Status != hcloud.ActionStatusSuccess {
		return
	}
	d := seen.Sub(t.since)
	if !a.Started.IsZero() && !a.Finished.IsZero() && !a.Finished.Before(a.Started) {
		d = min(d, a.Finished.Sub(a.Started))
	}
	d = max(d, 0)
	w.learnLocked(t, d)
	w.metrics.ActionDuration.WithLabelValues(t.command).Observe(d.Seconds())
}

func (w *Waiter) list(ctx context.Context, ids []int64) ([]*hcloud.Action, error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	opts := hcloud.ActionListOpts{
		ListOpts: hcloud.ListOpts{Page: 1, PerPage: actionsPerRequest},
		ID:       ids,
	}
	var all []*hcloud.Action
	for {
		w.metrics.ActionPollRequests.Inc()
		actions, resp, err := w.api.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, actions...)
		// One page holds every ID we ask for; follow further pages anyway
		// should the API ever page smaller.
		if resp == nil || resp.Meta.Pagination == nil || resp.Meta.Pagination.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.Meta.Pagination.NextPage
	}
}

func (w *Waiter) resolveLocked(id int64, err error) {
	t := w.byID[id]
	if t == nil {
		return
	}
	for _, c := range t.calls {
		if err != nil {
			c.errs = append(c.errs, err)
		}
		c.remaining--
		if c.remaining == 0 {
			close(c.done)
		}
	}
	delete(w.byID, id)
}

func (w *Waiter) finishLocked(c *waitCall, err error) {
	select {
	case <-c.done:
		return
	default:
	}
	c.errs = append(c.errs, err)
	c.remaining = 0
	close(c.done)
}
