package fencedleader

import (
	"testing"
	"time"
)

// TestContextEndsAfterWallClockPause: a VM suspended past the renew
// deadline may wake with a monotonic clock that did not count the
// suspend. The fence then refuses by the wall clock; the leadership
// context, which Kubernetes writes run under, must end too, without
// waiting for a call that checks, and not only once the monotonic clock
// has counted the whole renew deadline.
func TestContextEndsAfterWallClockPause(t *testing.T) {
	cfg := testConfig("a")
	l := newTestLeader(t, cfg)
	fakeNow(l) // the monotonic clock stands still, as in a suspend
	l.renewedAt(l.now(), time.Now().Round(0))
	lead(l)
	l.mu.Lock()
	l.armLapseLocked()
	l.mu.Unlock()
	ctx := l.Context()
	if ctx.Err() != nil {
		t.Fatal("the term's context is done right after a renewal")
	}
	// Woken: the wall clock says the last renewal is past the deadline.
	l.mu.Lock()
	l.renewedWall = time.Now().Round(0).Add(-cfg.LeaseDuration)
	l.mu.Unlock()
	// Nothing calls Leading, Enter or AllowWrite meanwhile.
	select {
	case <-ctx.Done():
	case <-time.After(cfg.RenewDeadline / 4):
		t.Fatalf("the leadership context is still live %s after waking past the renew deadline by the wall clock", cfg.RenewDeadline/4)
	}
}
