package pacer

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// manualClock is a clock.Clock whose time moves only when a test says so.
// Unlike k8s.io/utils/clock/testing.FakeClock it counts every call, so that
// simulate can tell when the goroutines on it have gone quiet.
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

func (c *manualClock) NewTimer(d time.Duration) clock.Timer {
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

func (c *manualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *manualClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (c *manualClock) Sleep(d time.Duration) { <-c.After(d) }

// Tick is not used by the pacer.
func (c *manualClock) Tick(time.Duration) <-chan time.Time {
	panic("manualClock: Tick is not implemented")
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

// Reset is not used by the pacer.
func (t *manualTimer) Reset(time.Duration) bool { panic("manualTimer: Reset is not implemented") }

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

// AdvanceTo moves the time to t, if later, and fires the timers that are
// due.
func (c *manualClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.advanceTo(t)
	}
}

// NextTimer returns when the earliest pending timer fires.
func (c *manualClock) NextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	next := c.timers[0].at
	for _, t := range c.timers {
		if t.at.Before(next) {
			next = t.at
		}
	}
	return next, true
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

// nextSend returns when p's first held-back request may be sent by the
// estimate (zero: none, or never). Timers alone cannot tell: a request
// that has just become first in line may not have set its timer yet.
func (p *Pacer) nextSend() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.b.known {
		return time.Time{}
	}
	for c, q := range p.queues {
		if len(q) > 0 {
			return p.b.readyAt(p.floor(class(c)), p.clock.Now())
		}
	}
	return time.Time{}
}

// simulate runs work on n goroutines and, whenever every unfinished
// goroutine is held back by p, moves clk on to the next moment a request
// may be sent or a timer fires, so that minutes of pacing take moments and
// no moment is skipped. Time stands still while requests are in flight.
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
	blocked := func() bool {
		a := active.Load()
		return a > 0 && int64(p.Stats().Waiting) == a
	}
	for active.Load() > 0 {
		if !blocked() {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		// Let goroutines woken a moment ago settle before looking.
		before := clk.events.Load()
		time.Sleep(time.Millisecond)
		if clk.events.Load() != before || !blocked() {
			continue
		}
		next := p.nextSend()
		if at, ok := clk.NextTimer(); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
		switch {
		case next.IsZero():
			t.Errorf("every worker is held back with nothing to wait for")
			clk.Advance(time.Hour) // let the deadlines release them
		case next.After(clk.Now()):
			clk.AdvanceTo(next)
		default:
			// Due now: the first in line is on its way to notice.
		}
	}
	wg.Wait()
}
