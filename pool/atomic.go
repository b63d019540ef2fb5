package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
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
	waitErr := waitAtomic(ctx, claims, group)
	if waitErr != nil {
		waitErr = fmt.Errorf("pool %q: atomic scale-up of %d: %w", p.cfg.Name, n, waitErr)
	}
	if waitErr == nil && allDone(claims) && !closedChan(group.failed) {
		return nil
	}

	p.stopClaims(claims)
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
	servers := p.takeCreated(claims)
	deleteErrs := p.rollBack(context.WithoutCancel(ctx), servers)
	p.log.Warn("atomic scale-up failed and was rolled back", zap.Int("delta", n), zap.Int("deleted", len(servers)))
	return fmt.Errorf("pool %q: atomic scale-up of %d failed and was rolled back: %w",
		p.cfg.Name, n, errors.Join(append(failures, deleteErrs...)...))
}

// waitAtomic waits until every claim is done, one of the group fails or
// ctx ends; only the last is an error (ctx's).
func waitAtomic(ctx context.Context, claims []*claim, group *atomicGroup) error {
	for _, c := range claims {
		select {
		case <-c.done:
		case <-group.failed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// allDone reports whether every claim's flow has ended.
func allDone(claims []*claim) bool {
	for _, c := range claims {
		if !closedChan(c.done) {
			return false
		}
	}
	return true
}

// stopClaims cancels the claims whose flows still run and waits for them
// all; the flows delete their own servers.
func (p *Pool) stopClaims(claims []*claim) {
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
}

// takeCreated marks the servers of the claims that succeeded as being
// deleted and returns them, and drops the placeholders of those that
// failed.
func (p *Pool) takeCreated(claims []*claim) []*hcloud.Server {
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
	return servers
}

// rollBack deletes servers, at once and bounded by cleanupTimeout from
// ctx, and returns the failures per server.
func (p *Pool) rollBack(ctx context.Context, servers []*hcloud.Server) []error {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	deleteErrs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if _, err := p.deleteAndWait(ctx, s); err != nil {
				deleteErrs[i] = fmt.Errorf("pool %q: rolling back server %s (%d): %w", p.cfg.Name, s.Name, s.ID, err)
				p.log.Error("rolling back atomic scale-up failed; the server keeps the pool's labels",
					zap.String("server", s.Name), zap.Int64("server_id", s.ID), zap.Error(err))
				return
			}
			p.deps.Cache.Remove(s.ID)
		})
	}
	wg.Wait()
	p.mu.Lock()
	for _, s := range servers {
		delete(p.deleting, s.ID)
	}
	p.mu.Unlock()
	p.observe()
	return deleteErrs
}

func closedChan(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
