package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/internal/metrics"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// created is the outcome of a create request.
type created struct {
	server  *hcloud.Server
	actions []*hcloud.Action // create_server and its next actions
	// adopted is true when the request found the server made by an
	// earlier attempt of the same claim (a lost response): its actions
	// are unknown.
	adopted bool
}

// runClaim is a claim's create flow. taskCtx ends only when Close gives
// up waiting; the claim's own cancellation and the creation timeout end
// the waits. The create request and its retries end with the creation
// timeout, and with the claim except for an attempt on the wire
// (requestContext), so that a removed claim sends no further attempt and
// an attempt's outcome is known. A create request that ends while its
// outcome is unknown is followed by a lookup of the server by its name
// (with taskCtx); a server found is deleted by the failing flow.
func (p *Pool) runClaim(taskCtx context.Context, c *claim) {
	defer close(c.done)

	softCtx, cancel := p.claimContext(taskCtx, c)
	defer cancel()
	flowCtx, cancelTimeout := context.WithTimeout(softCtx, p.opts.creationTimeout)
	defer cancelTimeout()
	deadline, _ := flowCtx.Deadline()
	timedCtx, cancelTimed := context.WithDeadline(taskCtx, deadline)
	defer cancelTimed()
	reqCtx, cancelReq := requestContext(timedCtx, softCtx)
	defer cancelReq()
	log := p.log.With(zap.String("server", c.name))

	opts, err := p.createOpts(flowCtx, c.set, c.name, c.replaces)
	if err != nil {
		p.fail(taskCtx, c, nil, "prepare create request", err)
		return
	}
	defer p.endSpread(c)
	if err := p.reserveSpread(flowCtx, c, &opts); err != nil {
		p.fail(taskCtx, c, nil, "reserve a spread placement group", err)
		return
	}
	if err := acquire(flowCtx, p.createSem); err != nil {
		p.fail(taskCtx, c, nil, "create server", err)
		return
	}
	p.mu.Lock()
	if c.cancelled {
		p.mu.Unlock()
		release(p.createSem)
		p.fail(taskCtx, c, nil, "create server", context.Canceled)
		return
	}
	c.phase, c.sent = claimCreating, true
	p.mu.Unlock()
	res, err := p.createServer(reqCtx, opts, log)
	if err != nil && refusedImage(err) {
		res, err = p.retryWithNewImage(reqCtx, c.set, opts, err, log)
	}
	release(p.createSem)
	// hcloud-go's own retries return the last attempt's error, not the
	// context's, when the context ends between attempts: an earlier
	// attempt may have created the server all the same.
	if err != nil && (ambiguous(err) || reqCtx.Err() != nil) {
		// The request may have created the server before it failed.
		res, err = p.findAfterFailure(taskCtx, c.name, err, log)
	}
	if err != nil {
		p.spreadRefused(c, err)
		p.fail(taskCtx, c, nil, "create server", err)
		return
	}
	p.mu.Lock()
	c.serverID, c.status = res.server.ID, res.server.Status
	p.mu.Unlock()
	log = log.With(zap.Int64("server_id", res.server.ID))
	log.Debug("server created", zap.Bool("adopted", res.adopted))

	if what, err := p.bringUp(flowCtx, c.set, &res, log); err != nil {
		p.fail(taskCtx, c, res.server, what, err)
		return
	}
	p.succeed(taskCtx, c, res, log)
}

// createOpts builds the create request: the server type from the
// catalogue (which must offer it in the location), the image for its
// architecture, and the pool's settings. replaces, when not 0, is the
// server the new one replaces (Surge): its ID goes into the label
// config.LabelReplaces. The request is built once per claim; its retries,
// a resend with a new image and the adoption of a server it made all keep
// it, labels included.
func (p *Pool) createOpts(ctx context.Context, set *settings, name string, replaces int64) (hcloud.ServerCreateOpts, error) {
	cfg := &set.cfg
	st, err := p.deps.Types.Lookup(ctx, cfg.ServerType)
	if err != nil {
		return hcloud.ServerCreateOpts{}, fmt.Errorf("server type %s: %w", cfg.ServerType, err)
	}
	if st == nil {
		return hcloud.ServerCreateOpts{}, &infoError{ErrorInfo{
			Class: Other, Code: CodeServerTypeNotFound,
			Message: fmt.Sprintf("server type %s does not exist", cfg.ServerType),
		}}
	}
	if loc, ok := st.Locations[cfg.Location]; !ok || !loc.Available {
		return hcloud.ServerCreateOpts{}, &infoError{ErrorInfo{
			Class: OutOfResources, Code: CodeServerTypeUnavailable,
			Message: fmt.Sprintf("server type %s is not available in location %s", st.Name, cfg.Location),
		}}
	}
	img, err := p.deps.Images.ResolvePool(ctx, cfg, st.Arch)
	if err != nil {
		if ctx.Err() != nil {
			return hcloud.ServerCreateOpts{}, fmt.Errorf("resolving image: %w", err)
		}
		return hcloud.ServerCreateOpts{}, &infoError{ErrorInfo{Class: Other, Code: CodeImage, Message: err.Error()}}
	}

	userData, err := p.userData(set, name, st.Arch)
	if err != nil {
		return hcloud.ServerCreateOpts{}, err
	}
	start := !set.stoppedCreates
	labels := set.copyLabels()
	// The user data's hash, for telling the server apart once the pool's
	// cloud-init has changed (Drift).
	labels[config.LabelUserDataHash] = UserDataHash(userData)
	if cfg.Name != cfg.FamilyName() {
		// A later offering's server: after a restart without the
		// offering, it is found in the offering's removed group again.
		labels[config.LabelOffering] = config.Offering{ServerType: cfg.ServerType, Location: cfg.Location}.String()
	}
	if replaces > 0 {
		labels[config.LabelReplaces] = strconv.FormatInt(replaces, 10)
	}
	opts := hcloud.ServerCreateOpts{
		Name:             name,
		ServerType:       &hcloud.ServerType{ID: st.ID, Name: st.Name},
		Image:            &hcloud.Image{ID: img.ID},
		Location:         &hcloud.Location{Name: cfg.Location},
		SSHKeys:          set.refs.SSHKeys,
		UserData:         userData,
		StartAfterCreate: &start,
		Labels:           labels,
		PlacementGroup:   set.refs.PlacementGroup,
		PublicNet: &hcloud.ServerCreatePublicNet{
			EnableIPv4: cfg.PublicIPv4,
			EnableIPv6: cfg.PublicIPv6,
		},
	}
	for _, fw := range set.refs.Firewalls {
		opts.Firewalls = append(opts.Firewalls, &hcloud.ServerCreateFirewall{Firewall: *fw})
	}
	// With a subnet range the server joins the network after creation,
	// with the range; the create request cannot name one.
	if set.refs.Network != nil && !set.stoppedCreates {
		opts.Networks = []*hcloud.Network{set.refs.Network}
	}
	return opts, nil
}

// createServer sends the create request, again with the same name after a
// transient failure. A uniqueness_error then means an earlier attempt
// created the server and its response was lost: the server is adopted if
// it carries our labels.
func (p *Pool) createServer(ctx context.Context, opts hcloud.ServerCreateOpts, log *zap.Logger) (created, error) {
	var out created
	unknown := false // an earlier attempt may have created the server
	err, stopped := p.retry(ctx, p.opts.createAttempts, func(attempt int) (bool, error) {
		res, resp, err := p.deps.Servers.Create(ctx, opts)
		if err == nil {
			out = created{server: res.Server, actions: append([]*hcloud.Action{res.Action}, res.NextActions...)}
			return false, nil
		}
		if hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
			out, err = p.adopt(ctx, opts.Name, err)
			return false, err
		}
		if attempt >= p.opts.createAttempts || !isTransient(resp, err) {
			if unknown && !ambiguous(err) {
				// This attempt's answer says nothing about the earlier
				// one's effect: the caller must look the server up.
				err = fmt.Errorf("%w (%w)", err, errEarlierAttemptUnknown)
			}
			return false, err
		}
		unknown = unknown || ambiguous(err)
		log.Info("create request failed; sending it again with the same name",
			zap.Int("attempt", attempt), zap.Error(err))
		return true, err
	})
	if stopped != nil {
		// The claim was removed or timed out: no further attempt.
		return created{}, fmt.Errorf("%w; not sent again: %w", err, stopped)
	}
	return out, err
}

// adopt looks up the server that holds name after a uniqueness_error.
func (p *Pool) adopt(ctx context.Context, name string, cause error) (created, error) {
	s, _, err := p.deps.Servers.GetByName(ctx, name)
	if err != nil {
		return created{}, fmt.Errorf("looking up server %s after %w: %w", name, cause, err)
	}
	if s == nil || !p.owns(s.Labels) {
		return created{}, &infoError{ErrorInfo{
			Class: Other, Code: CodeNameTaken,
			Message: fmt.Sprintf("server name %s is taken by a server outside pool %s", name, p.cfg.Name),
		}}
	}
	p.log.Info("adopted server created by an earlier attempt whose response was lost",
		zap.String("server", name), zap.Int64("server_id", s.ID))
	return created{server: s, adopted: true}, nil
}

// errEarlierAttemptUnknown marks the failure of a create request whose
// earlier attempt failed on the way, so that it may have created the
// server all the same.
var errEarlierAttemptUnknown = errors.New("an earlier attempt may have created the server")

// ambiguous reports a failed create request whose effect is unknown: the
// connection broke or the deadline passed while the request was out, or
// an earlier attempt's did.
func ambiguous(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errEarlierAttemptUnknown) {
		return true
	}
	var apiErr hcloud.Error
	return !errors.As(err, &apiErr) && isRequestFailure(err)
}

// findAfterFailure looks for the server of a create request that failed
// ambiguously, so that a server the API made anyway is adopted (and then
// deleted by the failing flow) instead of left unaccounted for. It keeps
// the original error when the lookup finds nothing or fails.
func (p *Pool) findAfterFailure(taskCtx context.Context, name string, cause error, log *zap.Logger) (created, error) {
	ctx, cancel := context.WithTimeout(taskCtx, lookupTimeout)
	defer cancel()
	s, _, err := p.deps.Servers.GetByName(ctx, name)
	if err != nil {
		log.Warn("looking up the server of a failed create request failed; the next listing shows it if it exists",
			zap.Error(err))
		return created{}, cause
	}
	if s == nil || !p.owns(s.Labels) {
		return created{}, cause
	}
	log.Info("the failed create request made the server; adopting it", zap.Int64("server_id", s.ID), zap.NamedError("cause", cause))
	return created{server: s, adopted: true}, nil
}

// bringUp waits until the new server runs: for its create actions and,
// for a pool with a subnet range, attaches it with the range and powers
// it on. It returns the failed step.
func (p *Pool) bringUp(ctx context.Context, set *settings, res *created, log *zap.Logger) (string, error) {
	if res.adopted {
		// The create actions of an adopted server are unknown: watch its
		// status instead, until it runs or, for a pool that attaches
		// and powers on itself, until the create has finished.
		server, err := p.awaitStatus(ctx, res.server, p.adoptedDone)
		if err != nil {
			return "wait for adopted server", err
		}
		res.server = server
		if server.Status == hcloud.ServerStatusRunning {
			return "", nil
		}
		if !set.stoppedCreates {
			// Created to start at once, yet off with no action running:
			// its create or start action failed.
			return "wait for adopted server", &infoError{ErrorInfo{Class: Other, Code: CodeActionFailed,
				Message: fmt.Sprintf("server %s is off after its create: its create or start action failed", server.Name)}}
		}
	} else if err := p.deps.Waiter.WaitAs(ctx, set.cfg.ServerType+"/"+set.cfg.Location, res.actions...); err != nil {
		return "wait for create", err
	}
	if !set.stoppedCreates {
		return "", nil
	}
	server := res.server
	if !res.adopted || server.PrivateNetFor(set.refs.Network) == nil {
		action, err := p.send(ctx, res.adopted, func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
			return p.deps.Servers.AttachToNetwork(ctx, server, hcloud.ServerAttachToNetworkOpts{
				Network: set.refs.Network,
				IPRange: prefixToIPNet(set.cfg.SubnetIPRange),
			})
		})
		if err != nil && !hcloud.IsError(err, hcloud.ErrorCodeServerAlreadyAttached) {
			return p.finishRefused(ctx, set, res, "attach to network", err, log)
		}
		if err := p.deps.Waiter.Wait(ctx, action); err != nil {
			return "attach to network", err
		}
		log.Debug("server attached to network", zap.Int64("network", set.refs.Network.ID))
	}
	action, err := p.send(ctx, res.adopted, func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
		return p.deps.Servers.Poweron(ctx, server)
	})
	if err != nil {
		return p.finishRefused(ctx, set, res, stepPowerOn, err, log)
	}
	if err := p.deps.Waiter.Wait(ctx, action); err != nil {
		return "power on", err
	}
	return "", nil
}

// adoptedDone reports whether an adopted server has finished its create:
// it runs, or it is off with no action running (for a pool that creates
// servers stopped, the create is done; for the others, it failed).
func (p *Pool) adoptedDone(s *hcloud.Server) bool {
	return s.Status == hcloud.ServerStatusRunning || (s.Status == hcloud.ServerStatusOff && !s.Locked)
}

// awaitStatus polls a server until done says so ([Pool.pollServer], at
// growing pauses); a server that disappears meanwhile fails the create.
// It is used only for servers adopted after a lost response, whose
// actions are unknown, so it costs requests for those alone.
func (p *Pool) awaitStatus(ctx context.Context, server *hcloud.Server, done func(*hcloud.Server) bool) (*hcloud.Server, error) {
	s, err := p.pollServer(ctx, server, done)
	if err == nil && s == nil {
		return nil, &infoError{ErrorInfo{Class: Other, Code: CodeActionFailed,
			Message: fmt.Sprintf("server %s disappeared while it was being created", server.Name)}}
	}
	return s, err
}

// send runs one create-side action request under the create concurrency
// bound, again after transient failures, and, for an adopted server whose
// create actions may still run, after "locked".
func (p *Pool) send(ctx context.Context, retryLocked bool, fn func(context.Context) (*hcloud.Action, *hcloud.Response, error)) (*hcloud.Action, error) {
	var action *hcloud.Action
	err, stopped := p.retry(ctx, p.opts.createAttempts, func(int) (bool, error) {
		if err := acquire(ctx, p.createSem); err != nil {
			return false, err
		}
		a, resp, err := fn(ctx)
		release(p.createSem)
		action = a
		return isTransient(resp, err) || (retryLocked && hcloud.IsError(err, hcloud.ErrorCodeLocked)), err
	})
	switch {
	case stopped != nil:
		return nil, stopped
	case err != nil:
		return nil, err
	}
	return action, nil
}

// succeed publishes the running server in the cache and drops the claim,
// in that order, so that the server is counted exactly once throughout.
func (p *Pool) succeed(taskCtx context.Context, c *claim, res created, log *zap.Logger) {
	srv := servercache.FromHCloud(res.server)
	// The start (or power-on) action succeeded, or an adopted server was
	// seen running: the server runs.
	srv.Status = hcloud.ServerStatusRunning
	// A server created stopped was attached after the create's answer.
	if n := c.set.refs.Network; n != nil && !slices.Contains(srv.NetworkIDs, n.ID) {
		srv.NetworkIDs = append(slices.Clone(srv.NetworkIDs), n.ID)
	}
	if p.deps.Cache.Current() == nil {
		// Upsert needs a snapshot to change; the first listing also shows
		// the new server.
		if _, err := p.deps.Cache.Get(taskCtx); err != nil {
			log.Warn("listing servers failed; the new server shows after the next listing", zap.Error(err))
		}
	}
	p.deps.Cache.Upsert(srv)

	p.mu.Lock()
	cancelled := c.cancelled
	if !cancelled {
		delete(p.claims, c.name)
	}
	p.mu.Unlock()
	if cancelled {
		// Deleted while its last action finished.
		p.fail(taskCtx, c, res.server, "", context.Canceled)
		return
	}
	elapsed := p.now().Sub(c.requested)
	p.metrics.ServerCreates.WithLabelValues(p.cfg.Name, metrics.ResultSuccess, "").Inc()
	p.metrics.ServerCreateDuration.WithLabelValues(p.cfg.Name).Observe(elapsed.Seconds())
	log.Info("server running", zap.Duration("elapsed", elapsed), zap.Bool("adopted", res.adopted))
	p.observe()
}

// fail ends a flow that did not produce a running server; every create
// flow, fresh or resumed, that does not succeed ends here. A server the
// flow made is judged first ([Pool.judge]): one that runs, ran or may
// have run is kept and the claim turns into it (see keep). One that
// provably never ran is deleted, and the delete awaited, so that a
// failure never leaks one. Then the claim becomes a placeholder carrying
// the error, or, if it was cancelled, disappears. The server of a
// cancelled claim is deleted whatever it did: the autoscaler asked for
// that.
//
// When Close gave up waiting (taskCtx ended), the server is left alone:
// it carries the pool's labels, so the next Pool finds it.
func (p *Pool) fail(taskCtx context.Context, c *claim, server *hcloud.Server, what string, err error) {
	log := p.log.With(zap.String("server", c.name))
	if taskCtx.Err() != nil {
		p.stopped(c, server, ErrClosed, log)
		return
	}
	if errors.Is(err, ErrFenced) {
		// No longer allowed to change servers: the next leader resumes
		// the flow from its listing; judging or deleting would be a write.
		p.stopped(c, server, ErrFenced, log)
		return
	}
	if server != nil && !p.isCancelled(c) {
		f, looked := p.judge(taskCtx, server.ID, log)
		if taskCtx.Err() != nil {
			p.stopped(c, server, ErrClosed, log)
			return
		}
		switch f {
		case fateKeep:
			if p.keep(taskCtx, c, server, looked, what, err, log) {
				return
			}
		case fateGone:
			p.deps.Cache.Remove(server.ID)
			server = nil
		}
	}
	if server != nil {
		p.cleanup(taskCtx, server, log)
	}

	// The offering is marked before the placeholder is published: whoever
	// sees the failed instance must also see IncreaseSize fail at once.
	info := classify(what, err)
	if info.Class == OutOfResources && p.opts.unavailableTTL > 0 {
		cfg := &c.set.cfg
		u := UnavailableError{ServerType: cfg.ServerType, Location: cfg.Location, Code: info.Code, Message: info.Message}
		if info.Code == string(errorCodePlacementGroupMemberLimitReached) || info.Code == CodePlacementGroupLimit {
			u.PlacementGroup = placementKey(cfg)
		}
		marked := p.offerings.mark(u, p.opts.unavailableTTL)
		log.Warn("offering marked unavailable; scale-ups of the pool fail at once until then",
			zap.Time("until", marked.Until))
	}

	p.mu.Lock()
	cancelled := c.cancelled
	if cancelled {
		delete(p.claims, c.name)
	} else {
		c.phase, c.err = claimFailed, &info
		c.serverID, c.status = 0, ""
	}
	p.mu.Unlock()

	if cancelled {
		c.result = fmt.Errorf("pool %q: server %s: claim cancelled", p.cfg.Name, c.name)
		log.Info("claim cancelled", zap.Bool("had_server", server != nil))
		p.observe()
		return
	}
	c.result = &ClaimError{Pool: p.cfg.Name, Name: c.name, Info: info, Err: err}
	c.group.fail()
	p.metrics.ServerCreates.WithLabelValues(p.cfg.Name, metrics.ResultError, info.Code).Inc()
	log.Warn("server creation failed", zap.String("class", info.Class.String()),
		zap.String("code", info.Code), zap.String("message", info.Message))
	p.observe()
}

// stopped ends a flow that Close stopped waiting for (why is ErrClosed)
// or that the write fence refused (ErrFenced): the claim goes, and the
// server is left alone; it carries the pool's labels, so the next Pool,
// or the next leader, finds it and resumes the flow.
func (p *Pool) stopped(c *claim, server *hcloud.Server, why error, log *zap.Logger) {
	p.mu.Lock()
	delete(p.claims, c.name)
	p.mu.Unlock()
	if server != nil {
		log.Info("create flow stopped; the server is left for the next start or leader to resume",
			zap.Int64("server_id", server.ID), zap.NamedError("reason", why))
	} else if why == ErrFenced {
		log.Info("create flow stopped before its server existed", zap.NamedError("reason", why))
	}
	c.result = fmt.Errorf("pool %q: server %s: %w", p.cfg.Name, c.name, why)
	if why == ErrFenced {
		p.observe()
	}
}

// keep ends a failed create flow whose server runs, ran or may have run
// ([Pool.judge]): the server stays and the claim turns into it, as on
// success, with the status the look-up showed ("unknown" when it failed),
// so that Instances reports it Running without error: min size protects
// it, and the autoscaler's unready-node handling (with drain) applies
// rather than its deletion of failed creations. Resume leaves it alone
// until a listing shows it in another status. keep returns false and
// leaves the claim when the claim was cancelled meanwhile: the caller
// then deletes the server, as the autoscaler asked.
func (p *Pool) keep(taskCtx context.Context, c *claim, server, looked *hcloud.Server, what string, cause error, log *zap.Logger) bool {
	var srv servercache.Server
	if looked != nil {
		srv = servercache.FromHCloud(looked)
	} else {
		srv = servercache.FromHCloud(server)
		srv.Status = hcloud.ServerStatusUnknown
	}
	srv.Pool = p.cfg.Name
	if p.deps.Cache.Current() == nil {
		if _, err := p.deps.Cache.Get(taskCtx); err != nil {
			log.Warn("listing servers failed; the kept server shows after the next listing", zap.Error(err))
		}
	}
	// Published before the claim goes, as in succeed.
	p.deps.Cache.Upsert(srv)

	p.mu.Lock()
	if c.cancelled {
		p.mu.Unlock()
		return false
	}
	delete(p.claims, c.name)
	p.released[srv.ID] = srv.Status
	p.mu.Unlock()

	info := classify(what, cause)
	p.metrics.ServerCreates.WithLabelValues(p.cfg.Name, metrics.ResultError, info.Code).Inc()
	log.Warn("create flow failed, but its server runs, ran or may have run: keeping it as a server of the pool",
		zap.Int64("server_id", srv.ID), zap.String("status", string(srv.Status)),
		zap.String("step", what), zap.Error(cause))
	p.observe()
	return true
}

// cleanup deletes a server whose create flow failed and waits for the
// delete, trying a bounded number of times. If every attempt fails, the
// error is logged: the server keeps the pool's labels, so it shows up in
// the next listing and the autoscaler can remove it.
func (p *Pool) cleanup(taskCtx context.Context, server *hcloud.Server, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(taskCtx, cleanupTimeout)
	defer cancel()
	err, _ := p.retry(ctx, p.opts.cleanupAttempts, func(attempt int) (bool, error) {
		gone, err := p.deleteAndWait(ctx, server)
		if err == nil {
			if !gone {
				log.Info("deleted server of a failed create flow", zap.Int64("server_id", server.ID))
			}
			p.deps.Cache.Remove(server.ID)
			return false, nil
		}
		if ctx.Err() != nil {
			return false, err
		}
		if attempt < p.opts.cleanupAttempts {
			log.Warn("deleting server of a failed create flow failed; trying again",
				zap.Int64("server_id", server.ID), zap.Int("attempt", attempt), zap.Error(err))
		}
		return true, err
	})
	if err != nil {
		log.Error("could not delete server of a failed create flow; it keeps the pool's labels and counts as the pool's server",
			zap.Int64("server_id", server.ID), zap.Error(err))
		// It counts from now on, not from the next listing: the max
		// check must see it. The next listing has its status.
		p.deps.Cache.Upsert(servercache.FromHCloud(server))
	}
}

// deleteAndWait deletes a server and waits for the delete action. gone is
// true when there was nothing to wait for: the server did not exist any
// more, or an earlier request's delete was already running.
func (p *Pool) deleteAndWait(ctx context.Context, server *hcloud.Server) (gone bool, err error) {
	action, gone, err := p.deleteServer(ctx, server.ID)
	if err != nil {
		return false, err
	}
	if gone {
		return true, nil
	}
	if err := p.deps.Waiter.Wait(ctx, action); err != nil {
		p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultError, errorCode(err)).Inc()
		return false, err
	}
	p.metrics.ServerDeletes.WithLabelValues(p.cfg.Name, metrics.ResultSuccess, "").Inc()
	return false, nil
}

// ClaimError is the failure of one claim: what AtomicIncreaseSize returns
// and what a placeholder's ErrorInfo describes.
type ClaimError struct {
	Pool string
	Name string // the server name of the claim
	Info ErrorInfo
	Err  error
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("pool %q: server %s: %s (%s, %s)", e.Pool, e.Name, e.Info.Message, e.Info.Code, e.Info.Class)
}

func (e *ClaimError) Unwrap() error { return e.Err }

// errorCode returns the Hetzner code of an API or action error, else
// CodeRequestFailed or CodeInternal, for metric labels.
func errorCode(err error) string {
	var apiErr hcloud.Error
	var actErr hcloud.ActionError
	switch {
	case errors.As(err, &apiErr):
		return string(apiErr.Code)
	case errors.As(err, &actErr):
		return actErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case isRequestFailure(err):
		return CodeRequestFailed
	default:
		return CodeInternal
	}
}

func acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func release(sem chan struct{}) { <-sem }

// claimContext returns a context of taskCtx that also ends when the claim
// is removed (DecreaseTargetSize or DeleteInstances call c.cancel), at
// once if it was removed already.
func (p *Pool) claimContext(taskCtx context.Context, c *claim) (context.Context, context.CancelFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithCancel(taskCtx)
	c.cancel = cancel
	if c.cancelled {
		cancel()
	}
	return ctx, cancel
}
