package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/internal/metrics"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// DeleteInstances deletes instances of the pool. An id is a provider ID
// ("hcloud://<server id>"), a claim ID ([ClaimID]) or a node name (the
// server name). Every id must belong to this pool, else nothing is deleted
// and the error names each id that does not.
//
// It refuses to take the target below the min size, except for failed
// creations: placeholders of failed claims (always removable, and without
// an API call) and servers reported as not started, which have never run
// (see [Pool.Instances]). The autoscaler deletes failed instances without
// a min-size cap. A server that has run is protected by min size whatever
// status a listing caught it in. A pending claim is cancelled; if its
// create request is in flight, its flow deletes the server once it
// exists. Servers are deleted with concurrent requests; they count as
// deleting (and leave the target) at once, and each one's delete action
// is awaited in the background (polled in shared batches) before the
// cache forgets it; a failed, vanished or timed-out action makes that
// server alone count again. DeleteInstances returns once
// the API accepted every delete request.
//
// Deleting an instance that is already being deleted, or a claim that is
// already gone, is not an error: the autoscaler repeats deletes of failed
// instances until they leave Instances.
func (p *Pool) DeleteInstances(ctx context.Context, ids []string) error {
	return p.deleteInstances(ctx, ids, false)
}

// ForceDeleteInstances is DeleteInstances without the min-size check.
func (p *Pool) ForceDeleteInstances(ctx context.Context, ids []string) error {
	return p.deleteInstances(ctx, ids, true)
}

// deleteTarget is one resolved id.
type deleteTarget struct {
	id     string
	claim  *claim              // a claim (placeholder or pending)
	server *servercache.Server // a server no claim owns
}

func (p *Pool) deleteInstances(ctx context.Context, ids []string, force bool) error {
	if len(ids) == 0 {
		return nil
	}
	if err := p.ensureListed(ctx); err != nil {
		return err
	}

	// The min holds across the pool's offerings: the others' healthy
	// targets are read under the family's lock, held until this delete
	// is recorded.
	unlock := p.lockFamily()
	defer unlock()
	otherT := p.othersHealthy()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("pool %q: %w", p.cfg.Name, ErrClosed)
	}
	snap := p.viewLocked()
	var errs []error
	var targets []deleteTarget
	seen := make(map[any]bool)
	for _, id := range ids {
		t, skip, err := p.resolveLocked(snap, id)
		switch {
		case err != nil:
			errs = append(errs, err)
		case skip:
		case t.claim != nil && !seen[t.claim]:
			seen[t.claim] = true
			targets = append(targets, t)
		case t.server != nil && !seen[t.server.ID]:
			seen[t.server.ID] = true
			targets = append(targets, t)
		}
	}
	if len(errs) > 0 {
		p.mu.Unlock()
		return errors.Join(errs...)
	}
	// Failed creations (placeholders, and servers that never started)
	// do not count against min: the autoscaler deletes them without a
	// min-size cap, and would retry in vain every loop. Everything else
	// may not go below min.
	live := 0
	now := p.now()
	for _, t := range targets {
		switch {
		case t.claim != nil && t.claim.phase == claimFailed:
		case t.server != nil && p.failedCreation(t.server, now):
		default:
			live++
		}
	}
	// Failed creations hold no capacity, so they do not count towards min
	// either: with one server and one placeholder at min 1, the server
	// stays.
	target := p.targetLocked(snap) + otherT
	minSize, _ := p.current().bounds()
	if healthy := target - p.failedLocked(snap, now); !force && live > 0 && healthy-live < minSize {
		p.mu.Unlock()
		return fmt.Errorf("pool %q: %w: deleting %d instances would leave %d of %d below the min size %d", p.cfg.Name, ErrBelowMin, live, healthy-live, target, minSize)
	}
	var servers []*servercache.Server
	for _, t := range targets {
		switch {
		case t.claim != nil && (t.claim.phase == claimQueued || t.claim.phase == claimFailed):
			p.dropClaimLocked(t.claim)
		case t.claim != nil:
			p.cancelClaimLocked(t.claim)
		default:
			p.deleting[t.server.ID] = struct{}{}
			servers = append(servers, t.server)
		}
	}
	p.mu.Unlock()
	unlock() // the deletes below are I/O; the target no longer counts them
	p.observe()

	if len(servers) == 0 {
		p.log.Info("instances removed", zap.Strings("ids", ids))
		return nil
	}
	return p.deleteServers(ctx, servers)
}

// resolveLocked finds what id names. skip reports an id that names
// something already gone or being deleted. p.mu must be held.
func (p *Pool) resolveLocked(snap *servercache.Snapshot, id string) (t deleteTarget, skip bool, err error) {
	notOurs := fmt.Errorf("pool %q: %w: instance %q", p.cfg.Name, ErrNotInPool, id)
	if pool, name, ok := ParseClaimID(id); ok {
		if pool != p.cfg.Name {
			return t, false, notOurs
		}
		if c := p.claims[name]; c != nil {
			return p.claimTarget(id, c)
		}
		if s := snap.ByName(name); s != nil && p.member(s) {
			// The claim's server has been created meanwhile.
			return p.serverTarget(id, s)
		}
		return t, true, nil
	}
	if serverID, ok := servercache.ParseProviderID(id); ok {
		for _, c := range p.claims {
			if c.serverID == serverID {
				return p.claimTarget(id, c)
			}
		}
		if s := snap.ByID(serverID); s != nil && p.member(s) {
			return p.serverTarget(id, s)
		}
		return t, false, notOurs
	}
	if strings.Contains(id, "://") {
		return t, false, notOurs
	}
	if c := p.claims[id]; c != nil {
		return p.claimTarget(id, c)
	}
	if s := snap.ByName(id); s != nil && p.member(s) {
		return p.serverTarget(id, s)
	}
	return t, false, notOurs
}

// failedLocked counts the failed creations the target includes:
// placeholders and servers that never came up.
func (p *Pool) failedLocked(snap *servercache.Snapshot, now time.Time) int {
	n := 0
	for _, c := range p.claims {
		if !c.cancelled && c.phase == claimFailed {
			n++
		}
	}
	if snap != nil {
		for _, s := range p.members(snap) {
			if _, owned := p.claims[s.Name]; owned || p.deletingLocked(s) {
				continue
			}
			if p.failedCreation(s, now) {
				n++
			}
		}
	}
	return n
}

// failedCreation reports a server that Instances shows as a failed
// creation (Creating with an error); see the function of that name.
func (p *Pool) failedCreation(s *servercache.Server, now time.Time) bool {
	return failedCreation(s, now, p.opts.creationTimeout)
}

func (p *Pool) claimTarget(id string, c *claim) (deleteTarget, bool, error) {
	if c.cancelled {
		return deleteTarget{}, true, nil
	}
	return deleteTarget{id: id, claim: c}, false, nil
}

func (p *Pool) serverTarget(id string, s *servercache.Server) (deleteTarget, bool, error) {
	if p.deletingLocked(s) {
		return deleteTarget{}, true, nil
	}
	return deleteTarget{id: id, server: s}, false, nil
}

// deleteServers sends the delete requests concurrently, marks the
// accepted ones deleting in the cache, and waits for their actions in the
// background. Servers whose request failed count again.
func (p *Pool) deleteServers(ctx context.Context, servers []*servercache.Server) error {
	actions := make([]*hcloud.Action, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			var finished bool
			actions[i], finished, errs[i] = p.deleteServer(ctx, s.ID)
			if finished {
				actions[i] = nil
			}
		})
	}
	wg.Wait()

	var accepted []*servercache.Server
	var acceptedActions []*hcloud.Action
	var marked []servercache.Server
	var failed []error
	p.mu.Lock()
	for i, s := range servers {
		if errs[i] != nil {
			delete(p.deleting, s.ID)
			failed = append(failed, fmt.Errorf("pool %q: deleting server %s (%d): %w", p.cfg.Name, s.Name, s.ID, errs[i]))
			continue
		}
		accepted = append(accepted, s)
		acceptedActions = append(acceptedActions, actions[i])
		m := *s
		m.Status = hcloud.ServerStatusDeleting
		marked = append(marked, m)
	}
	p.mu.Unlock()
	// Mark before the wait starts, so that the wait's Remove comes last.
	p.deps.Cache.Upsert(marked...)
	if len(accepted) > 0 {
		p.mu.Lock()
		started := p.startLocked(func(taskCtx context.Context) {
			p.awaitDeletes(taskCtx, accepted, acceptedActions)
		})
		p.mu.Unlock()
		if !started {
			// Close began meanwhile; the API deletes the servers anyway.
			p.forgetDeleted(accepted)
		}
	}
	names := make([]string, len(accepted))
	for i, s := range accepted {
		names[i] = s.Name
	}
	if len(names) > 0 {
		p.log.Info("deleting servers", zap.Strings("servers", names))
	}
	p.observe()
	return errors.Join(failed...)
}

// deleteServer sends one delete request under the delete concurrency
// bound. finished reports that there is no action to wait for: the server
// no longer exists, or is already being deleted by an earlier request
// whose response was lost. A request that failed on the way (the
// connection dropped, its deadline passed) is resolved by looking the
// server up, and sent again if the server is still there.
//
// ctx bounds the wait for a free slot, before anything is sent. Once the
// request is out, it and its look-up run on a context of their own,
// bounded by deleteRequestTimeout, that the caller's deadline does not
// end: a delete the API accepted while the caller gave up is reported as
// the success it is, not as a failure while the server is destroyed.
func (p *Pool) deleteServer(ctx context.Context, id int64) (action *hcloud.Action, finished bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := acquire(ctx, p.deleteSem); err != nil {
		return nil, false, err
	}
	defer release(p.deleteSem)
	reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteRequestTimeout)
	defer cancel()
	err, _ = p.retry(ctx, p.opts.deleteAttempts, func(int) (bool, error) {
		res, _, err := p.deps.Servers.DeleteWithResult(reqCtx, &hcloud.Server{ID: id})
		switch {
		case err == nil:
			action = res.Action
			return false, nil
		case hcloud.IsError(err, hcloud.ErrorCodeNotFound):
			finished = true
			return false, nil
		case !ambiguous(err):
			return false, err
		}
		lookupCtx, cancelLookup := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		s, _, lookupErr := p.deps.Servers.GetByID(lookupCtx, id)
		cancelLookup()
		switch {
		case lookupErr != nil:
			return false, fmt.Errorf("%w; the server's state is unknown: looking it up failed: %w", err, lookupErr)
		case s == nil || s.Status == hcloud.ServerStatusDeleting:
			p.log.Info("delete request failed on the way, but the server is deleted or being deleted",
				zap.Int64("server_id", id), zap.NamedError("cause", err))
			finished = true
			return false, nil
		}
		// The request did not go through and the caller still waits:
		// send it again.
		return ctx.Err() == nil && reqCtx.Err() == nil, err
	})
	if err != nil {
		p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultError, errorCode(err)).Inc()
		return nil, false, err
	}
	if finished {
		p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultSuccess, "").Inc()
	}
	return action, finished, nil
}

// awaitDeletes waits for the delete actions of accepted deletes, then
// forgets the servers whose delete finished. Each server's action is
// waited for on its own (the Waiter polls all of them in the same
// batches, so this costs no extra request): a vanished action or a
// timeout then concerns that server alone, and one failure never undoes
// the deleting mark of the others.
func (p *Pool) awaitDeletes(taskCtx context.Context, servers []*servercache.Server, actions []*hcloud.Action) {
	ctx, cancel := context.WithTimeout(taskCtx, deleteWaitTimeout)
	defer cancel()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, a := range actions {
		if a == nil {
			continue // nothing to wait for; counted by deleteServer
		}
		wg.Go(func() {
			errs[i] = p.deps.Waiter.Wait(ctx, a)
		})
	}
	wg.Wait()
	if taskCtx.Err() != nil && slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return // Close gave up; the API finishes the deletes anyway
	}
	var done []*servercache.Server
	for i, s := range servers {
		if actions[i] == nil {
			done = append(done, s)
			continue
		}
		if e := errs[i]; e != nil {
			p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultError, errorCode(e)).Inc()
			p.log.Error("server delete failed", zap.String("server", s.Name), zap.Int64("server_id", s.ID), zap.Error(e))
			// Undo the deleting mark in the cache: the server is still
			// there and counts again (the next listing has the truth).
			p.deps.Cache.Upsert(*s)
			p.mu.Lock()
			delete(p.deleting, s.ID)
			p.mu.Unlock()
			continue
		}
		p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultSuccess, "").Inc()
		done = append(done, s)
	}
	p.forgetDeleted(done)
}

// forgetDeleted drops deleted servers from the cache and from the pool's
// deleting set, in that order, so that they never count again.
func (p *Pool) forgetDeleted(servers []*servercache.Server) {
	if len(servers) == 0 {
		return
	}
	ids := make([]int64, len(servers))
	for i, s := range servers {
		ids[i] = s.ID
	}
	p.deps.Cache.Remove(ids...)
	p.mu.Lock()
	for _, id := range ids {
		delete(p.deleting, id)
	}
	p.mu.Unlock()
	p.log.Info("servers deleted", zap.Int("count", len(ids)))
	p.observe()
}

// prefixToIPNet converts a subnet range for hcloud-go.
func prefixToIPNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	p = p.Masked()
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}
