package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Waiter defaults.
const (
	// DefaultPollInterval is hcloud-go's own poll interval.
	DefaultPollInterval = 500 * time.Millisecond
	// actionsPerRequest is the API's largest page: with as many IDs as
	// fit on one page, one GET /actions answers 50 actions. hcloud-go's
	// WaitForFunc sends 25 per request and leaves the page size unset.
	actionsPerRequest = 50
	// burstDivisor shortens the poll interval while actions are finishing.
	burstDivisor = 4
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

// WaiterClock schedules the Waiter's poll ticks. hcloudtest.ManualClock
// implements it, so a test moves the fake API's actions and the poll ticks
// with one Advance.
type WaiterClock interface {
	After(d time.Duration) <-chan time.Time
}

type realWaiterClock struct{}

func (realWaiterClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WaiterOption configures a [Waiter].
type WaiterOption func(*Waiter)

// WithPollInterval sets the time between two polls (DefaultPollInterval).
// Values of zero or less are ignored.
func WithPollInterval(d time.Duration) WaiterOption {
	return func(w *Waiter) {
		if d > 0 {
			w.interval = d
		}
	}
}

// WithWaiterClock sets what schedules the poll ticks (default: the wall
// clock).
func WithWaiterClock(c WaiterClock) WaiterOption {
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

// Waiter waits for Hetzner actions on behalf of every caller in the
// process: one goroutine lists the running actions of all callers
// together, actionsPerRequest IDs per GET /actions, once per poll
// interval, and wakes each caller when its actions have finished. Scaling
// up by 50 therefore costs one request per tick instead of 50 (hcloud-go's
// WaitFor polls per call). Nothing is polled while nobody waits.
//
// Create one Waiter per process (per API project) and share it between
// pools; Close it after them.
type Waiter struct {
	api      ActionAPI
	interval time.Duration
	clock    WaiterClock
	log      *zap.Logger

	cancel context.CancelFunc // stops a poll in flight
	wake   chan struct{}      // capacity 1: "there may be new work"
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex // guards byID and closed
	byID   map[int64][]*waitCall
	closed bool
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
		clock:    realWaiterClock{},
		log:      zap.NewNop(),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		byID:     make(map[int64][]*waitCall),
	}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	w.log = w.log.Named("waiter")
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
	call := &waitCall{done: make(chan struct{})}
	var ids []int64
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
		ids = append(ids, a.ID)
	}
	if len(ids) == 0 {
		return errors.Join(call.errs...)
	}

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrWaiterClosed
	}
	call.remaining = len(ids)
	for _, id := range ids {
		w.byID[id] = append(w.byID[id], call)
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
	var running []int64
	for _, id := range ids {
		calls := w.byID[id]
		if i := slices.Index(calls, call); i >= 0 {
			running = append(running, id)
			calls = slices.Delete(calls, i, i+1)
		}
		if len(calls) == 0 {
			delete(w.byID, id)
		} else {
			w.byID[id] = calls
		}
	}
	return fmt.Errorf("waiting for actions %v: %w", running, ctx.Err())
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
		for id, calls := range w.byID {
			for _, c := range calls {
				w.finishLocked(c, ErrWaiterClosed)
			}
			delete(w.byID, id)
		}
	})
}

func (w *Waiter) loop(ctx context.Context) {
	defer close(w.done)
	var spent time.Duration // by the last poll
	burst := false          // the last poll finished some actions, not all
	for {
		w.mu.Lock()
		idle := len(w.byID) == 0
		w.mu.Unlock()
		if idle {
			spent, burst = 0, false
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		interval := w.interval
		if burst {
			interval = w.interval / burstDivisor
		}
		select {
		case <-w.clock.After(interval - min(spent, interval)):
		case <-w.stop:
			return
		}
		started := time.Now()
		finished, remaining := w.poll(ctx)
		// Keep a steady cadence: the time a poll took comes off the next
		// wait, so ticks do not drift by the request latency.
		spent = time.Since(started)
		// Actions started together finish together: once some of a
		// batch have finished, the rest are due, so look again sooner.
		burst = finished > 0 && remaining > 0
	}
}

// poll lists every running action once, one request per
// actionsPerRequest IDs, sent concurrently, and settles the finished ones.
// It returns how many finished and how many remain.
func (w *Waiter) poll(ctx context.Context) (finished, remaining int) {
	w.mu.Lock()
	ids := slices.Sorted(maps.Keys(w.byID))
	w.mu.Unlock()

	var g errgroup.Group
	for chunk := range slices.Chunk(ids, actionsPerRequest) {
		g.Go(func() error {
			actions, err := w.list(ctx, chunk)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("polling actions failed; retrying at the next tick",
						zap.Int("actions", len(chunk)), zap.Error(err))
				}
				return nil
			}
			w.settle(chunk, actions)
			return nil
		})
	}
	_ = g.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	remaining = len(w.byID)
	for _, id := range ids {
		if _, ok := w.byID[id]; !ok {
			finished++
		}
	}
	return finished, remaining
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

// settle wakes the callers of the finished actions among ids.
func (w *Waiter) settle(ids []int64, actions []*hcloud.Action) {
	w.mu.Lock()
	defer w.mu.Unlock()
	found := make(map[int64]bool, len(actions))
	for _, a := range actions {
		if a == nil {
			continue
		}
		found[a.ID] = true
		if a.Status == hcloud.ActionStatusRunning {
			continue
		}
		w.resolveLocked(a.ID, a.Error())
	}
	for _, id := range ids {
		if !found[id] {
			w.log.Warn("action not found", zap.Int64("action", id))
			w.resolveLocked(id, &ActionNotFoundError{ID: id})
		}
	}
}

func (w *Waiter) resolveLocked(id int64, err error) {
	for _, c := range w.byID[id] {
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
