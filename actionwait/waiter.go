package actionwait

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

// API is the part of hcloud.ActionClient that a [Waiter] uses. Pass
// (*hcloud.Client).Action.
type API interface {
	List(ctx context.Context, opts hcloud.ActionListOpts) ([]*hcloud.Action, *hcloud.Response, error)
}

var _ API = (*hcloud.ActionClient)(nil)

// ErrClosed is returned by [Waiter.Wait] after [Waiter.Close].
var ErrClosed = errors.New("action waiter closed")

// NotFoundError reports an action that the API no longer knows.
type NotFoundError struct {
	ID int64
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("action %d not found", e.ID)
}

// Waiter waits for Hetzner actions on behalf of every caller in the
// process: one goroutine starts the polls, which list the running actions
// of all callers together, actionsPerRequest IDs per GET /actions, and
// wakes each caller when its actions have finished. Polls do not wait for
// each other: a request that hangs holds back only the actions it asks
// for, which no other request asks for meanwhile. It polls an action when it can have
// finished, by the durations of the actions it watched before; the
// package documentation explains the schedule. Nothing is polled while
// nobody waits.
//
// Create one Waiter per process (per API project) and share it between
// pools; Close it after them.
type Waiter struct {
	api      API
	interval time.Duration
	clock    clock.Clock
	log      *zap.Logger
	metrics  *metrics.Set
	// registerer is where New registers metrics, unless set.
	registerer prometheus.Registerer
	pollHook   func(start time.Time) // tests only: called as a poll starts

	cancel   context.CancelFunc // stops the polls in flight
	wake     chan struct{}      // capacity 1: "there may be new work"
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	requests sync.WaitGroup // the poll requests in flight; loop waits for them

	mu       sync.Mutex // guards byID, inFlight, learned, lastPoll and closed
	byID     map[int64]*tracked
	learned  map[learnKey][]time.Duration // the last learnedSamples durations, oldest first
	lastPoll time.Time
	closed   bool
	// inFlight holds the IDs that a poll request on the wire asks for:
	// no other request asks for them until it has answered or failed,
	// whether or not anybody still waits for them.
	inFlight map[int64]bool
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

// New starts a Waiter that lists actions with api, usually
// (*hcloud.Client).Action. Close it to stop its goroutine.
func New(api API, opts ...Option) *Waiter {
	w := &Waiter{
		api:      api,
		interval: DefaultPollInterval,
		clock:    clock.RealClock{},
		log:      zap.NewNop(),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		byID:     make(map[int64]*tracked),
		inFlight: make(map[int64]bool),
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
// action, an [*NotFoundError] per vanished one. nil actions are
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
		return ErrClosed
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

// Pending returns how many running actions callers are waiting for. A
// test that drives the waiter with a fake clock can step the clock once
// every Wait it expects is registered.
func (w *Waiter) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byID)
}

// After returns a channel that receives one poll interval from now on
// the waiter's clock, for callers that poll something else at the
// waiter's pace, such as a server's status.
func (w *Waiter) After() <-chan time.Time {
	return w.AfterIntervals(1)
}

// AfterIntervals is [Waiter.After] for n poll intervals (at least one):
// one timer, so that a caller backing off between its polls waits the
// same on a fake clock stepped at once as on the wall clock.
func (w *Waiter) AfterIntervals(n int) <-chan time.Time {
	return w.clock.After(time.Duration(max(n, 1)) * w.interval)
}

// Close stops polling and waits for the goroutine to end. Callers still
// waiting get [ErrClosed]. Close is idempotent.
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
				w.finishLocked(c, ErrClosed)
			}
			delete(w.byID, id)
		}
	})
}
