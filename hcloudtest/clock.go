package hcloudtest

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock tells the fake API what time it is. Action progress, server
// creation times and the rate limiter's refill all read it, so a test that
// injects a [ManualClock] decides exactly when an action finishes.
type Clock interface {
	Now() time.Time
}

// WallWaits returns a clock.Clock that tells the time by c and waits in
// wall time. A test that moves the fake API's clock by hand gives it to
// code whose TTLs and timeouts should follow that clock while its waits
// (action polls, backoffs) pass by themselves. To move the waits too,
// give both the same k8s.io/utils/clock/testing.FakeClock instead.
func WallWaits(c Clock) clock.Clock { return wallWaits{now: c} }

type wallWaits struct {
	clock.RealClock
	now Clock
}

func (w wallWaits) Now() time.Time                  { return w.now.Now() }
func (w wallWaits) Since(t time.Time) time.Duration { return w.now.Now().Sub(t) }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ManualClock is a [Clock] that only moves when told to. It is safe for
// concurrent use, so one goroutine can advance it while others wait for
// actions.
type ManualClock struct {
	mu      sync.Mutex // guards now and waiters
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	deadline time.Time
	ch       chan time.Time
}

// NewManualClock returns a clock that reads start until it is advanced.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires every channel returned by
// [ManualClock.After] whose deadline has been reached. A negative d is
// ignored: time on this clock never runs backwards.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t and fires the waiters whose deadline is reached.
// Setting an earlier time is allowed; it fires nothing.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

func (c *ManualClock) setLocked(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.deadline.After(t) {
			w.ch <- t // buffered with room for exactly this send
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// After returns a channel that receives the clock's time once the clock has
// been advanced by at least d from now. A d of zero or less fires at once.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{deadline: c.now.Add(d), ch: ch})
	return ch
}
