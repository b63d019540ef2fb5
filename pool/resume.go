package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// resumeSteps bounds the requests of one resumed flow's state machine, so
// that an API that keeps contradicting itself (an attach refused as
// "already attached" while the server shows no attachment) cannot turn it
// into a request loop.
const resumeSteps = 12

// stepPowerOn names the power-on step in errors and logs.
const stepPowerOn = "power on"

// errNotResumable ends a resumed flow that found the server in a state no
// create flow leaves behind: the server is left as it is.
var errNotResumable = errors.New("not a create flow left unfinished")

// Resume starts a create flow for every server of the pool in the cache's
// current snapshot that looks like a create flow left unfinished, by a
// process that stopped (or by one still finishing it), and that no flow
// of this pool owns:
//
//   - initializing or starting, and younger than the creation timeout:
//     the flow waits until it runs (a starting server that turns off
//     without having been seen initializing may be a rebooted node that
//     someone shut down: it is left alone, not deleted);
//   - off, in a pool that creates servers stopped (subnet range): the
//     flow looks the server up and reads its action history, and goes on
//     only if the history proves that a subnet pool's create flow left
//     it before its power-on ([Pool.createdStopped]: created stopped,
//     nothing but the create and network attachments succeeded, no start
//     tried before an attachment). It then attaches it with the range if
//     it is not on the pool's network, and powers it on. A server someone
//     stopped or detached, one created started (by the pool before a
//     reload gave it a range), and one whose history does not reach back
//     to its create are left alone, whatever their age: the same rule as
//     [Pool.judge]'s, that only what provably never ran is finished, so
//     neither a restart nor a reload undoes what a person did.
//
// A resumed server is a claim with a server from then on: Instances shows
// it Creating under its provider ID, TargetSize counts it once, and once
// it runs it goes into the cache as running at once (no listing needed).
// A resumed flow that fails ends as any create flow does ([Pool.fail]):
// a server that ran is kept, one that provably never ran is deleted and
// leaves a placeholder; one that finds the server gone, not ours any
// more, or in a state no create flow leaves (see errNotResumable) drops
// its claim and leaves the server alone, and the pool does not look at
// that server again until a listing shows it in another status.
//
// Attach and power-on are tolerant of a second process doing the same: an
// "already attached" answer, or a power-on refused while the server
// starts or runs, counts as done, and a locked server is waited for.
//
// Resume does no I/O itself; it returns the number of flows it started.
// A Cluster calls it after its first listing and after every Refresh.
func (p *Pool) Resume() int {
	now := p.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	snap := p.deps.Cache.Current()
	if snap == nil {
		p.mu.Unlock()
		return 0
	}
	servers := p.members(snap)
	set := p.current()
	listed := make(map[int64]bool, len(servers))
	var started []*claim
	for _, s := range servers {
		listed[s.ID] = true
		if status, ok := p.released[s.ID]; ok {
			if status == s.Status {
				continue
			}
			delete(p.released, s.ID)
		}
		if _, owned := p.claims[s.Name]; owned || p.deletingLocked(s) || !p.resumable(set, s, now) {
			continue
		}
		requested := s.Created
		if requested.IsZero() {
			requested = now
		}
		c := &claim{
			name: s.Name, requested: requested, done: make(chan struct{}), set: set,
			phase: claimCreating, serverID: s.ID, status: s.Status,
			replaces: replacesOf(s.Labels),
		}
		p.claims[c.name] = c
		started = append(started, c)
	}
	for id := range p.released {
		if !listed[id] {
			delete(p.released, id)
		}
	}
	for _, c := range started {
		listedStatus := c.status
		// Cannot fail: closed was checked above, under the same lock.
		p.startLocked(func(ctx context.Context) { p.runResume(ctx, c, listedStatus) })
	}
	p.mu.Unlock()

	for _, c := range started {
		p.log.Info("resuming a create flow left unfinished",
			zap.String("server", c.name), zap.Int64("server_id", c.serverID), zap.String("status", string(c.status)))
	}
	if len(started) > 0 {
		p.observe()
	}
	return len(started)
}

// resumable reports whether a listed server may be a create flow left
// unfinished; runResume decides after looking it up.
func (p *Pool) resumable(set *settings, s *servercache.Server, now time.Time) bool {
	young := s.Created.IsZero() || now.Sub(s.Created) <= p.opts.creationTimeout
	switch s.Status {
	case hcloud.ServerStatusInitializing, hcloud.ServerStatusStarting:
		return young
	case hcloud.ServerStatusOff:
		return set.stoppedCreates
	default:
		return false
	}
}

// runResume is the flow of a resumed server: look it up, decide, and
// drive it to running. Like runClaim, it is bounded by the creation
// timeout, counted from now.
func (p *Pool) runResume(taskCtx context.Context, c *claim, listed hcloud.ServerStatus) {
	defer close(c.done)

	softCtx, cancel := p.claimContext(taskCtx, c)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(softCtx, p.opts.creationTimeout)
	defer cancelTimeout()
	log := p.log.With(zap.String("server", c.name), zap.Int64("server_id", c.serverID))
	ref := &hcloud.Server{ID: c.serverID, Name: c.name}

	server, err := p.getServer(ctx, c.serverID)
	if err == nil && server != nil && !p.owns(server.Labels) {
		err = errNotResumable
	}
	if err == nil && server != nil {
		server, err = p.finishCreate(ctx, c.set, server, false, log)
	}
	switch {
	case err == nil && server == nil:
		log.Info("server of a resumed create flow is gone")
		p.dropResumed(c, "")
		p.deps.Cache.Remove(c.serverID)
	case err == nil:
		p.succeed(taskCtx, c, created{server: server, adopted: true}, log)
	case errors.Is(err, errNotResumable):
		if p.isCancelled(c) {
			p.fail(taskCtx, c, ref, "", context.Canceled)
			return
		}
		log.Info("server is not a create flow left unfinished; leaving it as it is", zap.String("status", string(listed)))
		p.dropResumed(c, listed)
	case taskCtx.Err() == nil && softCtx.Err() == nil && !isStepError(err):
		// The look-ups failed until the timeout: what the server needs
		// is unknown, so it is left alone, not deleted.
		log.Warn("could not look up a server to resume its create flow; leaving it as it is", zap.Error(err))
		p.dropResumed(c, "")
	default:
		what := "resume create"
		var se *stepError
		if errors.As(err, &se) {
			what, err = se.what, se.err
		}
		if server == nil {
			server = ref
		}
		p.fail(taskCtx, c, server, what, err)
	}
}

// stepError is a failed step of a resumed flow, with the step's name.
type stepError struct {
	what string
	err  error
}

func (e *stepError) Error() string { return e.what + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func isStepError(err error) bool {
	var se *stepError
	return errors.As(err, &se)
}

// finishCreate drives a server from where a create flow left it to
// running, one idempotent step at a time, looking the server up after
// each. It returns nil, nil when the server disappeared.
//
// neverRan says that the caller knows the server has never run (its own
// create flow made it); otherwise only seeing it initializing proves
// that. A server of a pool that creates servers started which is off
// without that proof may be a node that someone shut down after it ran
// (a resumed flow found it starting after a reboot): errNotResumable, so
// that it is left alone rather than deleted as a failed create.
func (p *Pool) finishCreate(ctx context.Context, set *settings, s *hcloud.Server, neverRan bool, log *zap.Logger) (*hcloud.Server, error) {
	var err error
	for range resumeSteps {
		if s != nil && s.Status == hcloud.ServerStatusInitializing {
			neverRan = true
		}
		switch {
		case s == nil:
			return nil, nil
		case s.Status == hcloud.ServerStatusRunning:
			return s, nil
		case s.Status == hcloud.ServerStatusDeleting:
			return nil, nil
		case s.Locked || s.Status == hcloud.ServerStatusInitializing || s.Status == hcloud.ServerStatusStarting:
			// A create, attach or power-on runs, ours or another
			// process's: wait for it to end.
			if s, err = p.pollServer(ctx, s, settledForResume); err != nil {
				return nil, &stepError{"wait for server", err}
			}
		case s.Status == hcloud.ServerStatusOff && !set.stoppedCreates && !neverRan:
			return nil, errNotResumable
		case s.Status == hcloud.ServerStatusOff && !set.stoppedCreates:
			return nil, &stepError{"wait for server", &infoError{ErrorInfo{Class: Other, Code: CodeActionFailed,
				Message: fmt.Sprintf("server %s is off after its create: its create or start action failed", s.Name)}}}
		case s.Status == hcloud.ServerStatusOff && !neverRan:
			// Attach and power on only a server that provably never ran:
			// one someone stopped or detached stays so, whatever its age.
			stopped, err := p.createdStopped(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("reading the action history of server %s: %w", s.Name, err)
			}
			if !stopped {
				return nil, errNotResumable
			}
			neverRan = true
		case s.Status == hcloud.ServerStatusOff && s.PrivateNetFor(set.refs.Network) == nil:
			if s, err = p.attachStep(ctx, set, s, log); err != nil {
				return nil, err
			}
		case s.Status == hcloud.ServerStatusOff:
			server := s
			action, err := p.send(ctx, true, func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
				return p.deps.Servers.Poweron(ctx, server)
			})
			switch {
			case err == nil:
				if err := p.deps.Waiter.Wait(ctx, action); err != nil {
					return nil, &stepError{"power on", err}
				}
			case hcloud.IsError(err, hcloud.ErrorCodeLocked):
			default:
				// Refused, perhaps because another process powered it on
				// meanwhile: the look-up tells.
				now, lerr := p.getServer(ctx, s.ID)
				if lerr != nil || now == nil || now.Status == hcloud.ServerStatusOff {
					return nil, &stepError{"power on", err}
				}
			}
			if s, err = p.getServer(ctx, s.ID); err != nil {
				return nil, &stepError{"power on", err}
			}
		default:
			return nil, errNotResumable
		}
	}
	return nil, &stepError{"resume create", fmt.Errorf("server %s is still %s after %d steps", s.Name, s.Status, resumeSteps)}
}

// attachStep attaches a stopped server of a subnet pool to the pool's
// network with its range, tolerating another process doing the same, and
// looks the server up again.
func (p *Pool) attachStep(ctx context.Context, set *settings, s *hcloud.Server, log *zap.Logger) (*hcloud.Server, error) {
	action, err := p.send(ctx, true, func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
		return p.deps.Servers.AttachToNetwork(ctx, s, hcloud.ServerAttachToNetworkOpts{
			Network: set.refs.Network,
			IPRange: prefixToIPNet(set.cfg.SubnetIPRange),
		})
	})
	switch {
	case err == nil:
		if err := p.deps.Waiter.Wait(ctx, action); err != nil {
			return nil, &stepError{"attach to network", err}
		}
		log.Debug("server attached to network", zap.Int64("network", set.refs.Network.ID))
	case hcloud.IsError(err, hcloud.ErrorCodeServerAlreadyAttached, hcloud.ErrorCodeLocked):
		// Another process attached it, or is acting on it.
	default:
		return nil, &stepError{"attach to network", err}
	}
	now, err := p.getServer(ctx, s.ID)
	if err != nil {
		return nil, &stepError{"attach to network", err}
	}
	return now, nil
}

// settledForResume reports a server that no action is changing.
func settledForResume(s *hcloud.Server) bool {
	return !s.Locked && s.Status != hcloud.ServerStatusInitializing && s.Status != hcloud.ServerStatusStarting
}

// getServer looks a server up, asking again at the waiter's interval
// after a failure, until ctx ends. A server that does not exist is nil.
func (p *Pool) getServer(ctx context.Context, id int64) (*hcloud.Server, error) {
	w := p.deps.Waiter
	for {
		s, _, err := p.deps.Servers.GetByID(ctx, id)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("looking up server %d: %w", id, err)
		}
		select {
		case <-w.After():
		case <-ctx.Done():
			return nil, fmt.Errorf("looking up server %d: %w", id, err)
		}
	}
}

// pollServer looks a server up until done says so, one poll interval of
// the waiter after the first look and twice as long after each further
// one, up to actionwait.MaxGapIntervals (5 s at the default interval, as
// long as the waiter lets an overdue action go unpolled): a server whose
// create or start takes a minute costs about 15 requests, not 120, and a
// restart that resumes many create flows at once does not spend the API
// budget on them. It returns nil, nil when the server disappeared or is
// being deleted.
func (p *Pool) pollServer(ctx context.Context, s *hcloud.Server, done func(*hcloud.Server) bool) (*hcloud.Server, error) {
	w := p.deps.Waiter
	pause := 1
	for !done(s) {
		select {
		case <-w.AfterIntervals(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("server %s is %s: %w", s.Name, s.Status, ctx.Err())
		}
		pause = min(2*pause, actionwait.MaxGapIntervals)
		next, _, err := p.deps.Servers.GetByID(ctx, s.ID)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("server %s is %s: %w", s.Name, s.Status, ctx.Err())
		case err != nil:
			continue
		case next == nil || next.Status == hcloud.ServerStatusDeleting:
			return nil, nil
		}
		s = next
	}
	return s, nil
}

// isCancelled reports whether DeleteInstances took the claim out of the
// target.
func (p *Pool) isCancelled(c *claim) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.cancelled
}

// dropResumed removes a resumed flow's claim without touching the
// server, which counts as a listed server again. A non-empty status is
// remembered, so that Resume does not look at the server again while
// listings show it in that status.
func (p *Pool) dropResumed(c *claim, status hcloud.ServerStatus) {
	p.mu.Lock()
	if p.claims[c.name] == c {
		delete(p.claims, c.name)
	}
	if status != "" {
		p.released[c.serverID] = status
	}
	p.mu.Unlock()
	c.result = fmt.Errorf("pool %q: server %s: %w", p.cfg.Name, c.name, errNotResumable)
	p.observe()
}

// finishRefused handles an attach or power-on that the API refused: if a
// process that resumed the flow is acting on the server (locked, already
// attached, already running), the create is finished from what the API
// shows, as a resumed flow would. Otherwise the refusal is the flow's
// failure.
func (p *Pool) finishRefused(ctx context.Context, set *settings, res *created, what string, cause error, log *zap.Logger) (string, error) {
	if ctx.Err() != nil {
		return what, cause
	}
	locked := hcloud.IsError(cause, hcloud.ErrorCodeLocked)
	var apiErr hcloud.Error
	if !locked && (what != stepPowerOn || !errors.As(cause, &apiErr)) {
		return what, cause
	}
	s, err := p.getServer(ctx, res.server.ID)
	if err != nil || s == nil || (!locked && s.Status == hcloud.ServerStatusOff) {
		return what, cause
	}
	s, err = p.finishCreate(ctx, set, s, true, log)
	if err != nil || s == nil {
		return what, cause
	}
	log.Info("finished the create flow from the server's state after a refused request",
		zap.String("step", what), zap.NamedError("cause", cause))
	res.server = s
	return "", nil
}
