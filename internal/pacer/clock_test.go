package pacer

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// manualClock is a Clock whose time moves only when a test says so.
type manualClock struct {
	events atomic.Int64 // calls of any method: a changing count means someone is busy

	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Unix(1_800_000_000, 0)}
}

type manualTimer struct {
	clock *manualClock
	at    time.Time
	c     chan time.Time
}

func (c *manualClock) Now() time.Time {
	c.events.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) Timer {
	c.events.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.clock.events.Add(1)
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	i := slices.Index(t.clock.timers, t)
	if i < 0 {
		return false
	}
	t.clock.timers = slices.Delete(t.clock.timers, i, i+1)
	return true
}

// Advance moves the time by d and fires the timers that are due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceTo(c.now.Add(d))
}

// AdvanceToNext moves the time to the earliest pending timer and fires it;
// it reports false if no timer is pending.
func (c *manualClock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	next := c.timers[0].at
	for _, t := range c.timers {
		if t.at.Before(next) {
			next = t.at
		}
	}
	c.advanceTo(next)
	return true
}

func (c *manualClock) advanceTo(now time.Time) {
	c.events.Add(1)
	c.now = now
	c.timers = slices.DeleteFunc(c.timers, func(t *manualTimer) bool {
		if t.at.After(now) {
			return false
		}
		t.c <- now
		return true
	})
}

// Timers returns the number of pending timers.
func (c *manualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// waitFor polls cond in real time until it holds, failing the test after
// five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// simulate runs work on n goroutines and moves clk on to the next timer
// whenever every unfinished goroutine is held back by p, so that minutes of
// pacing take moments. Time stands still while requests are in flight.
func simulate(t *testing.T, clk *manualClock, p *Pacer, n int, work func(worker int)) {
	t.Helper()
	var active atomic.Int64
	active.Store(int64(n))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer active.Add(-1)
			work(i)
		})
	}
	// A goroutine woken a moment ago may still be on its way back to
	// sleep; the clock moves only after a quiet spell with no clock calls.
	const quiet = 2 * time.Millisecond
	blocked := func() bool {
		a := active.Load()
		return a > 0 && int64(p.Stats().Waiting) == a
	}
	for active.Load() > 0 {
		if !blocked() {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		before := clk.events.Load()
		time.Sleep(quiet)
		if clk.events.Load() != before || !blocked() {
			continue
		}
		if !clk.AdvanceToNext() {
			t.Errorf("every worker is held back and no timer is pending")
			clk.Advance(time.Hour) // let the deadlines release them
		}
	}
	wg.Wait()
}
