package fencedleader

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNow gives l a clock the test moves.
func fakeNow(l *Leader) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	return func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// lead opens a term as the elector does once BeforeLeading succeeded.
func lead(l *Leader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term, l.endTerm = context.WithCancelCause(context.Background())
	l.leading, l.writable = true, true
}

func newTestLeader(t *testing.T, cfg Config) *Leader {
	t.Helper()
	client, _ := released().client(1)
	l, err := New(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFenceAfterPause checks the fence on the leader's own monotonic
// clock: a replica whose last renewal is older than the renew deadline,
// as after a pause (SIGSTOP, a frozen VM) longer than that, sends no
// write and takes no change, whatever its elector still believes; its
// leadership ends for good and its leadership context is cancelled.
func TestFenceAfterPause(t *testing.T) {
	cfg := DefaultConfig("ns", "lease", "a")
	l := newTestLeader(t, cfg)
	advance := fakeNow(l)
	allowed := func() bool {
		p, err := l.AllowWrite()
		if err != nil {
			return false
		}
		p.Done(true)
		return true
	}
	entered := func() bool {
		leave, err := l.Enter()
		if err != nil {
			return false
		}
		leave()
		return true
	}
	if allowed() || entered() || l.Context().Err() == nil {
		t.Fatal("a replica that never acquired the Lease may write or change")
	}
	l.renewedAt(l.now(), time.Time{})
	if allowed() {
		t.Fatal("writes are let through before the term started")
	}
	lead(l)
	ctx := l.Context()
	advance(cfg.RenewDeadline - time.Millisecond)
	if !allowed() || !entered() || !l.Leading() || ctx.Err() != nil {
		t.Fatalf("renewed %s ago (deadline %s): want writes, changes and a live context", cfg.RenewDeadline-time.Millisecond, cfg.RenewDeadline)
	}
	advance(cfg.LeaseDuration)
	if allowed() || entered() || l.Leading() {
		t.Fatal("after a pause past the lease: writes or changes let in")
	}
	if ctx.Err() == nil || !strings.Contains(context.Cause(ctx).Error(), "not within the renew deadline 10s") {
		t.Errorf("leadership context after the pause: %v; want cancelled naming the renew deadline", context.Cause(ctx))
	}
	select {
	case <-l.Lost():
	default:
		t.Error("Lost is not closed after the pause")
	}
	// A renewal that succeeds again does not bring leadership back: the
	// replica restarts as a standby.
	l.renewedAt(l.now(), time.Time{})
	if allowed() || entered() {
		t.Fatal("a renewal after the pause reopened the fence")
	}
}

// TestFenceReleaseWaitsForWrites: closing the fence (before the Lease is
// released) waits until every write let through has its answer.
func TestFenceReleaseWaitsForWrites(t *testing.T) {
	l := newTestLeader(t, DefaultConfig("ns", "lease", "a"))
	l.renewedAt(time.Now(), time.Time{})
	lead(l)
	p, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := l.closeFence(ctx); err == nil || !strings.Contains(err.Error(), "1 writes still in flight") {
		t.Fatalf("closeFence with a write in flight: %v; want an error after the timeout", err)
	}
	if _, err := l.AllowWrite(); err == nil {
		t.Fatal("a write was let through after closeFence")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.closeFence(t.Context()) }()
	select {
	case err := <-closed:
		t.Fatalf("closeFence returned (%v) while a write has no answer", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.Done(true)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("closeFence after the last answer: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closeFence did not return after the last write was answered")
	}
}

// TestReleaseWaitsOutAWriteWithoutAnswer: a write that ended without an
// answer may still be carried out: the fence stays closed for the write
// grace after it ended; a write answered holds nothing. The permit runs
// to the write window: the lease duration less 1s less a tenth.
func TestReleaseWaitsOutAWriteWithoutAnswer(t *testing.T) {
	cfg := DefaultConfig("ns", "lease", "a")
	cfg.WriteGrace = 300 * time.Millisecond
	l := newTestLeader(t, cfg)
	l.renewedAt(time.Now(), time.Now().Round(0))
	lead(l)
	answered, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	lost, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(lost.Deadline); left < 12*time.Second || left > 12500*time.Millisecond {
		t.Errorf("permit deadline in %s; want the write window, 12.5s", left)
	}
	answered.Done(true)
	lost.Done(false)
	if err := lost.Check(); err != nil {
		t.Errorf("Check with the fence open: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := l.closeFence(ctx); err == nil {
		t.Fatal("closeFence returned at once although a write without answer may still take effect")
	}
	if err := lost.Check(); err == nil {
		t.Error("Check after closeFence let a write on")
	}
	start := time.Now()
	if err := l.closeFence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("closeFence waited %s; want until the write grace after the lost write (300ms)", waited)
	}
}

// TestPermitCheckFollowsTheLease: a permit may be written until the write
// window after the last renewal, by the leader's clock.
func TestPermitCheckFollowsTheLease(t *testing.T) {
	cfg := Config{Namespace: "ns", Name: "lease", Identity: "a",
		LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second, WriteGrace: time.Second}
	l := newTestLeader(t, cfg)
	advance := fakeNow(l)
	l.renewedAt(l.now(), time.Time{})
	lead(l)
	p, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Done(true)
	// Window: 10s stored, less 1s, less 1s.
	advance(7*time.Second + 999*time.Millisecond)
	if err := p.Check(); err != nil {
		t.Errorf("Check 7.999s after the renewal (window 8s): %v", err)
	}
	if _, err := l.AllowWrite(); err == nil {
		t.Error("a new write was let through past the renew deadline")
	}
	advance(time.Millisecond)
	if err := p.Check(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Check 8s after the renewal: %v; want a refusal", err)
	}
}
