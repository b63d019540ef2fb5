package servercache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// ErrClosed is returned by the methods that list after Close.
var ErrClosed = errors.New("servercache: closed")

// failureBackoff is the pause after a failed listing before Get lists
// again; it doubles per consecutive failure up to maxFailureBackoff (or
// the TTL if that is shorter). Without it, a caller that polls every few
// seconds would spend the API budget on a listing that keeps failing; with
// the cap, a value is fetched again within one autoscaler loop (10 s) of
// the API answering again. A fetch that keeps failing costs at most one
// attempt per 10 s (its first page, or the one catalogue request), about
// 360 requests an hour while the API fails, most of them answered with an
// error at once.
const (
	failureBackoff    = 5 * time.Second
	maxFailureBackoff = 10 * time.Second
)

// staleWait is how long a reader that could be served stale data waits
// for a fetch before it takes the stale value. hcloud-go retries a failing
// request for several seconds, longer than an autoscaler call may take.
const staleWait = time.Second

// refresher decides when a cached value must be fetched again and turns
// concurrent fetches into one. The value itself is stored by fetch.
type refresher struct {
	what string // "servers" or "server types", for errors and logs
	// fetch stores a fresh value.
	fetch   func(ctx context.Context) (fetched, error)
	ttl     time.Duration
	jitter  float64
	rand    func() float64
	clock   clock.Clock
	timeout time.Duration
	log     *zap.Logger

	group singleflight.Group
	wg    sync.WaitGroup // counts fetches in flight, so that close can wait for them

	mu        sync.Mutex // guards the fields below
	fetched   bool       // a fetch has succeeded
	expiresAt time.Time
	gen       uint64 // bumped by invalidate: a fetch that started before cannot make the value fresh
	started   uint64 // fetches started so far
	lastOK    uint64 // the started-number of the last successful fetch
	failures  int    // consecutive failed fetches
	retryAt   time.Time
	lastErr   error
	// lastOKAt is when the last successful fetch ended; staleSince is when
	// a fetch after the value expired first failed, zero while the value
	// is fresh or was never served stale.
	lastOKAt   time.Time
	staleSince time.Time
	closed     bool
	cancel     context.CancelFunc // of the fetch in flight, nil when none
}

// fetched describes a successful fetch.
type fetched struct {
	// floor is the shortest time the value may stay fresh (the budget
	// floor), or 0.
	floor time.Duration
	// fields describe the value in the debug log of the fetch.
	fields []zap.Field
}

func newRefresher(what string, ttl time.Duration, o options, log *zap.Logger, fetch func(context.Context) (fetched, error)) *refresher {
	return &refresher{
		what:    what,
		fetch:   fetch,
		ttl:     ttl,
		jitter:  o.jitter,
		rand:    o.rand,
		clock:   o.clock,
		timeout: o.listTimeout,
		log:     log,
	}
}

// ensure fetches when the value is missing or expired, or always with
// force, sharing a fetch already in flight. A caller whose ctx ends stops
// waiting at once; the fetch goes on for the others.
func (r *refresher) ensure(ctx context.Context, force bool) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if !force {
		if r.freshLocked() {
			r.mu.Unlock()
			return nil
		}
		if err := r.backingOffLocked(); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	ticket := r.started
	r.mu.Unlock()

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for the %s listing: %w", r.what, err)
	}
	ch := r.group.DoChan("", func() (any, error) {
		return nil, r.run(ctx, force, ticket)
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the %s listing: %w", r.what, ctx.Err())
	}
}

// run is the body of one coalesced fetch. ticket is the number of fetches
// started when the caller decided to fetch.
func (r *refresher) run(ctx context.Context, force bool, ticket uint64) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	// A caller that found the value stale may get here just after another
	// fetch completed; fetching again would double the cost of an expiry.
	if force {
		if r.lastOK > ticket {
			r.mu.Unlock()
			return nil
		}
	} else {
		if r.freshLocked() {
			r.mu.Unlock()
			return nil
		}
		if err := r.backingOffLocked(); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	r.started++
	seq, gen := r.started, r.gen
	// The fetch serves every waiting caller, so the starter's cancellation
	// must not end it; its values (trace IDs and such) are kept.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	r.cancel = cancel
	r.wg.Add(1)
	defer r.wg.Done()
	r.mu.Unlock()

	start := r.clock.Now()
	res, err := r.fetch(fctx)
	now := r.clock.Now()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancel = nil
	if err != nil {
		r.failures++
		r.lastErr = err
		if r.fetched && r.staleSince.IsZero() && !now.Before(r.expiresAt) {
			r.staleSince = start
		}
		r.retryAt = now.Add(r.backoffLocked())
		r.log.Warn("listing "+r.what+" failed",
			zap.Duration("took", now.Sub(start)),
			zap.Int("consecutive_failures", r.failures),
			zap.Time("retry_at", r.retryAt),
			zap.Error(err))
		return err
	}
	if !r.staleSince.IsZero() {
		r.log.Info("listed "+r.what+" again after failures; the stale value is replaced",
			zap.Time("stale_since", r.staleSince))
	}
	r.failures, r.lastErr, r.retryAt = 0, nil, time.Time{}
	r.staleSince = time.Time{}
	r.fetched = true
	r.lastOKAt = now
	r.lastOK = seq
	if gen == r.gen {
		r.expiresAt = now.Add(r.interval(res.floor))
	} else {
		// Invalidated while in flight: what prompted it may postdate the
		// listing, so the next Get lists again.
		r.expiresAt = time.Time{}
	}
	r.log.Debug("listed "+r.what, append(res.fields,
		zap.Duration("took", now.Sub(start)),
		zap.Time("expires_at", r.expiresAt))...)
	return nil
}

// interval is how long a fetched value stays fresh: the TTL, raised so
// that even the low end of the jitter respects the budget floor, times a
// random factor in [1-jitter, 1+jitter).
func (r *refresher) interval(floor time.Duration) time.Duration {
	base := max(r.ttl, time.Duration(float64(floor)/(1-r.jitter)))
	factor := 1 + r.jitter*(2*r.rand()-1)
	return time.Duration(float64(base) * factor)
}

func (r *refresher) backoffLocked() time.Duration {
	limit := min(r.ttl, maxFailureBackoff)
	d := failureBackoff
	for i := 1; i < r.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// ensureStale is ensure for a reader that prefers a stale value to an
// error. With no value yet, or one fetched more than maxStale ago, it is
// ensure. Otherwise it starts or joins a fetch when none is due to
// back off, waits for it at most staleWait, and returns nil whether the
// fetch succeeded, failed or is still running: the caller reads the
// value in memory, fresh or not.
func (r *refresher) ensureStale(ctx context.Context, maxStale time.Duration) error {
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return ErrClosed
	case r.freshLocked():
		r.mu.Unlock()
		return nil
	case !r.fetched || maxStale <= 0 || r.clock.Now().Sub(r.lastOKAt) > maxStale:
		r.mu.Unlock()
		return r.ensure(ctx, false)
	case r.backingOffLocked() != nil:
		r.mu.Unlock()
		return nil
	}
	ticket := r.started
	r.mu.Unlock()

	ch := r.group.DoChan("", func() (any, error) {
		return nil, r.run(ctx, false, ticket)
	})
	t := time.NewTimer(staleWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// stale returns since when the value has been served stale, zero while it
// is fresh or before the first failure after it expired.
func (r *refresher) stale() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freshLocked() {
		return time.Time{}
	}
	return r.staleSince
}

func (r *refresher) freshLocked() bool {
	return r.fetched && r.clock.Now().Before(r.expiresAt)
}

func (r *refresher) backingOffLocked() error {
	if r.lastErr == nil || !r.clock.Now().Before(r.retryAt) {
		return nil
	}
	return fmt.Errorf("not listing %s again before %s: %w",
		r.what, r.retryAt.Format(time.RFC3339), r.lastErr)
}

// invalidate makes the next ensure fetch, also during a failure backoff.
func (r *refresher) invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.expiresAt = time.Time{}
	r.retryAt = time.Time{}
}

func (r *refresher) expiry() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expiresAt
}

// close cancels a fetch in flight and waits for it to end.
func (r *refresher) close() {
	r.mu.Lock()
	r.closed = true
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
