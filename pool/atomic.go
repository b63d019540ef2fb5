package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// AtomicIncreaseSize adds n servers, all or none. Unlike IncreaseSize it
// waits, bounded by ctx, until all n run. If any fails, or ctx ends first,
// it cancels the rest, deletes the servers already created, waits for
// those deletes, and returns an error (a [*ClaimError] per failed claim,
// joined); no placeholder remains. The roll-back runs to its end even
// after ctx ended, bounded by its own timeout.
func (p *Pool) AtomicIncreaseSize(ctx context.Context, n int) error {
	group := &atomicGroup{failed: make(chan struct{})}
	claims, err := p.addClaims(ctx, n, group)
	if err != nil {
		return err
	}
	var waitErr error
wait:
	for _, c := range claims {
		select {
		case <-c.done:
		case <-group.failed:
			break wait
		case <-ctx.Done():
			waitErr = fmt.Errorf("pool %q: atomic scale-up of %d: %w", p.cfg.Name, n, ctx.Err())
			break wait
		}
	}
	allDone := true
	for _, c := range claims {
		select {
		case <-c.done:
		default:
			allDone = false
		}
	}
	if waitErr == nil && allDone && !closedChan(group.failed) {
		return nil
	}

	// Stop what still runs; the flows delete their own servers.
	p.mu.Lock()
	for _, c := range claims {
		if p.claims[c.name] != c {
			continue // finished
		}
		if c.phase == claimCreating {
			p.cancelClaimLocked(c)
		} else {
			p.dropClaimLocked(c)
		}
	}
	p.mu.Unlock()
	for _, c := range claims {
		<-c.done
	}
	var failures []error
	if waitErr != nil {
		failures = append(failures, waitErr)
	}
	for _, c := range claims {
		var ce *ClaimError
		if errors.As(c.result, &ce) {
			failures = append(failures, ce)
		}
	}

	// Delete what succeeded before the failure.
	var servers []*hcloud.Server
	p.mu.Lock()
	for _, c := range claims {
		if c.result == nil && c.serverID != 0 {
			servers = append(servers, &hcloud.Server{ID: c.serverID, Name: c.name})
			p.deleting[c.serverID] = struct{}{}
		}
		if p.claims[c.name] == c { // a placeholder left by a flow that failed
			p.dropClaimLocked(c)
		}
	}
	p.mu.Unlock()
	p.observe()

	rollbackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	deleteErrs := make([]error, len(servers))
	var g errgroup.Group
	for i, s := range servers {
		g.Go(func() error {
			if _, err := p.deleteAndWait(rollbackCtx, s); err != nil {
				deleteErrs[i] = fmt.Errorf("pool %q: rolling back server %s (%d): %w", p.cfg.Name, s.Name, s.ID, err)
				p.log.Error("rolling back atomic scale-up failed; the server keeps the pool's labels",
					zap.String("server", s.Name), zap.Int64("server_id", s.ID), zap.Error(err))
				return nil
			}
			p.deps.Cache.Remove(s.ID)
			return nil
		})
	}
	_ = g.Wait()
	p.mu.Lock()
	for _, s := range servers {
		delete(p.deleting, s.ID)
	}
	p.mu.Unlock()
	p.observe()

	p.log.Warn("atomic scale-up failed and was rolled back", zap.Int("delta", n), zap.Int("deleted", len(servers)))
	return fmt.Errorf("pool %q: atomic scale-up of %d failed and was rolled back: %w",
		p.cfg.Name, n, errors.Join(append(failures, deleteErrs...)...))
}

func closedChan(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
