package fencedleader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
)

var _ hcloudscale.Fence = (*Leader)(nil)

// AllowWrite is the Cluster's write fence ([hcloudscale.Fence]): a write
// passes while this replica leads, its last renewal younger than the
// renew deadline. Its permit lets it be written until the end of the
// write window after that renewal (the Lease's stored duration less its
// one-second resolution less a tenth), by this replica's clock, and only
// while the term lasts; a write whose answer is lost holds the Lease for
// the write grace after it ended.
func (l *Leader) AllowWrite() (hcloudscale.Permit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writable || !l.leadsLocked() {
		return hcloudscale.Permit{}, l.notLeaderLocked()
	}
	l.writes++
	left := l.cfg.writeWindow() - l.sinceRenewalLocked()
	var once sync.Once
	return hcloudscale.Permit{
		// The transport measures by time.Now: the time left, not l.now.
		Deadline: time.Now().Add(left),
		Check:    l.checkWrite,
		Done:     func(answered bool) { once.Do(func() { l.writeEnded(answered) }) },
	}, nil
}

// checkWrite is asked before each write of a request's bytes: the term
// lasts and the write window is not over.
func (l *Leader) checkWrite() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writable {
		return fmt.Errorf("%w; its leadership ended", ErrNotLeader)
	}
	if since := l.sinceRenewalLocked(); since >= l.cfg.writeWindow() {
		return fmt.Errorf("%w; its last renewal of the Lease was %s ago: a standby may take the Lease over before the write is carried out",
			ErrNotLeader, since.Round(time.Millisecond))
	}
	return nil
}

// writeEnded counts a write out; one whose answer was lost may still be
// carried out by the API within the write grace.
func (l *Leader) writeEnded(answered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes--
	if !answered {
		if until := l.now().Add(l.cfg.WriteGrace); until.After(l.unknownUntil) {
			l.unknownUntil = until
		}
		l.log.Warn("a write ended without an answer: the Lease is kept until the API can no longer carry it out",
			zap.Duration("write_grace", l.cfg.WriteGrace))
	}
	l.left.Broadcast()
}

// closeFence turns every later write away and waits until the writes let
// through have ended and those whose answer was lost are past the write
// grace, and so are the writes of the holder this replica took the Lease
// over from (a release hands the Lease on without a wait), or ctx ends
// (an error then: a write may still take effect).
func (l *Leader) closeFence(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writable = false
	stop := context.AfterFunc(ctx, l.broadcast)
	defer stop()
	for {
		until := l.unknownUntil
		if l.lease.oldWritesUntil.After(until) {
			until = l.lease.oldWritesUntil
		}
		wait := until.Sub(l.now())
		if l.writes == 0 && wait <= 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d writes still in flight, %s until writes without an answer (this replica's, or the previous holder's) can no longer take effect: %w",
				l.writes, max(wait, 0).Round(time.Millisecond), ctx.Err())
		}
		if l.writes == 0 {
			t := time.AfterFunc(wait, l.broadcast)
			l.left.Wait()
			t.Stop()
			continue
		}
		l.left.Wait()
	}
}

func (l *Leader) broadcast() {
	l.mu.Lock()
	l.left.Broadcast()
	l.mu.Unlock()
}

// renewedAt records a successful acquire or renewal whose renew time was
// taken at t (and at wall by the wall clock).
func (l *Leader) renewedAt(t, wall time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.renewed) {
		l.renewed, l.renewedWall = t, wall
	}
}
