package fencedleader

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseState is what the lock saw of the Lease and wrote to it; guarded
// by the Leader's mu.
type leaseState struct {
	// observed is the holder in the last Lease read or written.
	observed string
	// wrote: a write of this process under its identity succeeded.
	wrote bool
	// sent holds the renew times of the writes this process sent under
	// its identity since the last that succeeded, and that one, answered
	// or not: a Lease renewed under this identity at another time was
	// renewed by another process.
	sent []time.Time
	// conflict: another process renews under this identity.
	conflict error
	// oldWritesUntil is when, by this process's clock, the writes of a
	// holder this process took the Lease over from without a release
	// can no longer be carried out. It lists and writes only after, and
	// does not release the Lease before: the next holder of a released
	// Lease leads at once.
	oldWritesUntil time.Time
}

// madeLocked reports whether this process sent a write with renew time t.
// The Lease keeps microseconds.
func (s *leaseState) madeLocked(t time.Time) bool {
	t = t.Truncate(time.Microsecond)
	return slices.ContainsFunc(s.sent, func(u time.Time) bool { return u.Truncate(time.Microsecond).Equal(t) })
}

// fencedLock is the Lease lock of the elector. It records when client-go
// took the renew time of each successful acquire or renewal of this
// replica, which is what the fence measures against; it tells a take-over from a renewal and a
// Lease renewed by another process under this identity; and it holds a
// release back until the fence is closed and every write let through has
// its answer.
type fencedLock struct {
	resourcelock.Interface
	l *Leader
}

// Get reads the Lease. A Lease held under this identity that this
// process did not renew as it is ends leadership for good.
func (f *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := f.Interface.Get(ctx)
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease.conflict != nil {
		return nil, nil, l.lease.conflict
	}
	if err != nil || rec == nil {
		return rec, raw, err
	}
	if rec.HolderIdentity == l.cfg.Identity && l.lease.wrote && !l.lease.madeLocked(rec.RenewTime.Time) {
		l.lease.conflict = fmt.Errorf("%w (%s): the Lease was renewed at %s, and not by this process: give every replica an identity of its own",
			ErrSameIdentity, l.cfg.Identity, rec.RenewTime.UTC().Format(time.RFC3339Nano))
		l.log.Error("refusing to lead", zap.Error(l.lease.conflict))
		l.endTermLocked(l.lease.conflict, true)
		return nil, nil, l.lease.conflict
	}
	l.lease.observed = rec.HolderIdentity
	return rec, raw, nil
}

// Create makes the Lease. Its previous holder, if it was deleted, is
// unknown and may still write: the creator waits the lease duration and
// the write grace before it leads.
func (f *fencedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l := f.l
	sent, wall := l.renewTimeTaken(rec)
	l.sending(rec)
	if err := f.Interface.Create(ctx, rec); err != nil {
		return err
	}
	if rec.HolderIdentity == l.cfg.Identity {
		l.mu.Lock()
		l.lease.succeededLocked(rec.RenewTime.Time)
		l.acquiredLocked("", l.cfg.LeaseDuration+l.cfg.WriteGrace, "created the Lease: a holder of a deleted Lease may still write")
		l.mu.Unlock()
		l.renewedAt(sent, wall)
	}
	return nil
}

// Update renews, takes over or (with no holder) releases the Lease.
func (f *fencedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l := f.l
	if rec.HolderIdentity == "" {
		// client-go releases the Lease: after Stop, or after renewals
		// failed for the renew deadline. It reads the Lease first but
		// asks whether it leads of the record it observed before, so on
		// a retry after a conflict it would clear the hold of a replica
		// that took the Lease over meanwhile: release only a Lease the
		// read just before shows held under this identity.
		l.mu.Lock()
		conflict, holder := l.lease.conflict, l.lease.observed
		l.mu.Unlock()
		if conflict != nil {
			return fmt.Errorf("not releasing the Lease: %w", conflict)
		}
		if holder != l.cfg.Identity {
			return fmt.Errorf("not releasing the Lease: %q holds it", holder)
		}
		if err := l.closeFence(ctx); err != nil {
			return fmt.Errorf("not releasing the Lease: %w", err)
		}
		if err := f.Interface.Update(ctx, rec); err != nil {
			return err
		}
		l.mu.Lock()
		l.lease.observed = ""
		l.mu.Unlock()
		return nil
	}
	sent, wall := l.renewTimeTaken(rec)
	l.sending(rec)
	if err := f.Interface.Update(ctx, rec); err != nil {
		return err
	}
	if rec.HolderIdentity != l.cfg.Identity {
		return nil
	}
	l.mu.Lock()
	l.lease.succeededLocked(rec.RenewTime.Time)
	switch prev := l.lease.observed; {
	case prev == l.cfg.Identity && !l.lease.wrote:
		// Held under this identity by a process that is not this one:
		// a container restarted with its pod's name, or a second
		// replica with the same identity. It may still write.
		l.acquiredLocked(prev, l.cfg.LeaseDuration+l.cfg.WriteGrace, "took the Lease over from a process with this identity")
	case prev != "" && prev != l.cfg.Identity:
		// Expired: its holder's permits ended before this update was
		// sent; what it wrote may be carried out within the grace.
		l.acquiredLocked(prev, l.cfg.WriteGrace, "took the Lease over from "+prev)
	default:
		l.acquiredLocked(prev, 0, "")
	}
	l.mu.Unlock()
	l.renewedAt(sent, wall)
	return nil
}

// renewTimeTaken is when client-go took the renew time of rec, by the
// fence's clock and by the wall clock: the fence measures a renewal from
// then, not from its send. client-go may send it up to a renew deadline
// later (after a failed fast path, the slow path reads the Lease first),
// and a standby that saw an earlier renewal with a renew time in the same
// second takes this one for no change and times the Lease from that one.
func (l *Leader) renewTimeTaken(rec resourcelock.LeaderElectionRecord) (mono, wall time.Time) {
	ago := max(time.Since(rec.RenewTime.Time), 0)
	return l.now().Add(-ago), time.Now().Round(0).Add(-ago)
}

// sending records the renew time of a write under this identity.
func (l *Leader) sending(rec resourcelock.LeaderElectionRecord) {
	if rec.HolderIdentity != l.cfg.Identity {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lease.sent = append(l.lease.sent, rec.RenewTime.Time)
	if n := len(l.lease.sent); n > maxUnanswered {
		// Keep the first, the last write known to have succeeded.
		l.lease.sent = slices.Delete(l.lease.sent, 1, n-maxUnanswered+1)
	}
}

// maxUnanswered bounds the renew times kept of writes sent since the last
// that succeeded: two per retry period while renewals fail, far more than
// a renew deadline holds.
const maxUnanswered = 4096

// succeededLocked records that the write with renew time t succeeded:
// the Lease holds it or a later write, so earlier renew times need not be
// kept.
func (s *leaseState) succeededLocked(t time.Time) {
	s.sent = append(s.sent[:0], t)
}

// acquiredLocked records a successful write under this identity that
// followed a Lease held by prev; wait > 0 marks an acquisition that must
// wait before leading.
func (l *Leader) acquiredLocked(prev string, wait time.Duration, why string) {
	renewal := l.lease.wrote && prev == l.cfg.Identity
	l.lease.wrote = true
	l.lease.observed = l.cfg.Identity
	if renewal {
		return
	}
	if wait <= 0 {
		return
	}
	if until := l.now().Add(wait); until.After(l.lease.oldWritesUntil) {
		l.lease.oldWritesUntil = until
	}
	l.log.Info(why+": waiting before listing, writing and releasing it", zap.Duration("wait", wait))
}
