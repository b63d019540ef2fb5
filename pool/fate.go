package pool

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/actionwait"
)

// fate is what the end of a failed create flow does with its server.
type fate int

const (
	// fateGone: the server does not exist any more, or is being deleted.
	fateGone fate = iota
	// fateDelete: the server provably never ran; the flow deletes it.
	fateDelete
	// fateKeep: the server runs, ran, or may have run; it stays, and
	// counts as a server of the pool like any other.
	fateKeep
)

// createCommands are the actions a create flow runs on a server before
// the server first starts: a history of these alone (and of failed
// actions) is one of a server that never ran.
var createCommands = map[string]bool{"create_server": true, "attach_to_network": true}

// startCommand is the action that starts a server: at its create (a
// next action of create_server) or later (a power-on).
const startCommand = "start_server"

// errNoHistory is the look-up of a server's action history when the pool
// has no client for it.
var errNoHistory = errors.New("no client for the server's action history")

// judge decides what becomes of the server of a create flow that failed.
// It holds the rule that a create flow never deletes a server that ran,
// and [Pool.fail], where every failing flow ends, is its one caller.
//
// It looks the server up (GET /servers/{id}) as it is now, whatever the
// flow saw before. Only a server that provably never ran is deleted:
//
//   - initializing: only a server's first creation shows that status;
//   - off, with an action history that goes back to its create_server
//     and holds nothing that succeeded but the create and network
//     attachments: created stopped, or its start failed, and never
//     started since. While another action still runs on it (a start
//     chained to a create that failed), it is looked at again, at the
//     waiter's growing pauses, until that ends.
//
// A server that is starting is looked at again in the same way until its
// start has ended. Everything else is kept: running, stopping,
// rebuilding, migrating and unknown servers; an off one that started once
// (a node stopped after it ran) or whose history cannot be read or does
// not reach back to its create; one still starting when the look-up's
// time (lookupTimeout) is up; and one that cannot be looked up, since a
// failed look-up proves nothing. The server is returned as looked up; nil when
// the look-up failed or found nothing.
func (p *Pool) judge(ctx context.Context, id int64, log *zap.Logger) (fate, *hcloud.Server) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	pause := 1
	for {
		s, err := p.getServer(ctx, id)
		switch {
		case err != nil:
			log.Warn("looking up the server of a failed create flow failed; keeping it, since it may have run",
				zap.Int64("server_id", id), zap.Error(err))
			return fateKeep, nil
		case s == nil || s.Status == hcloud.ServerStatusDeleting:
			return fateGone, s
		case s.Status == hcloud.ServerStatusInitializing:
			return fateDelete, s
		case s.Status == hcloud.ServerStatusStarting:
			// A start runs: it ends running (kept) or, if it fails, off
			// (judged by the history). Look again once it has ended.
		case s.Status != hcloud.ServerStatusOff:
			return fateKeep, s
		default:
			h, err := p.history(ctx, s)
			switch {
			case err != nil:
				log.Warn("reading the action history of a stopped server failed; keeping it, since it may have run",
					zap.Int64("server_id", id), zap.Error(err))
				return fateKeep, s
			case h == historyStarted:
				return fateKeep, s
			case h == historyNeverStarted:
				return fateDelete, s
			}
			// A start still runs on the stopped server (one chained to
			// a create that failed, say): look again once it has ended.
		}
		select {
		case <-p.deps.Waiter.AfterIntervals(pause):
		case <-ctx.Done():
			log.Warn("the server of a failed create flow is still being started; keeping it, since it may run",
				zap.Int64("server_id", id), zap.String("status", string(s.Status)))
			return fateKeep, s
		}
		pause = min(2*pause, actionwait.MaxGapIntervals)
	}
}

// historyVerdict is what a server's action history says about its
// starts.
type historyVerdict int

const (
	// historyNeverStarted: the history reaches back to the server's
	// create_server, and nothing but the create and network attachments
	// succeeded or runs.
	historyNeverStarted historyVerdict = iota
	// historyStarted: an action other than those succeeded (a start, or
	// anything else that may have started it), or the history does not
	// reach back to the create.
	historyStarted
	// historyStarting: nothing started the server yet, but an action
	// that may start it still runs.
	historyStarting
)

// serverActions lists every action of a server, 50 per request.
func (p *Pool) serverActions(ctx context.Context, s *hcloud.Server) ([]*hcloud.Action, error) {
	if p.deps.ServerActions == nil {
		return nil, errNoHistory
	}
	return p.deps.ServerActions.AllFor(ctx, s, hcloud.ActionListOpts{ListOpts: hcloud.ListOpts{PerPage: 50}})
}

// createdStopped reads a server's action history and reports whether it
// proves that the server is one a subnet pool's create flow left before
// its power-on: the history reaches back to its create_server; nothing
// but the create and network attachments succeeded, and nothing else
// runs; and no start was tried before an attachment succeeded (a create
// flow of a subnet pool creates its servers stopped and attaches them
// before it powers them on, so an earlier start means a server created
// started, by the pool before it had a range, or by someone else).
// Anything else (a detach, a start, a rebuild, a history that does not
// reach back to the create) is someone's doing, which Resume leaves
// alone.
func (p *Pool) createdStopped(ctx context.Context, s *hcloud.Server) (bool, error) {
	actions, err := p.serverActions(ctx, s)
	if err != nil {
		return false, err
	}
	slices.SortFunc(actions, func(a, b *hcloud.Action) int { return cmp.Compare(a.ID, b.ID) })
	created, attached := false, false
	for _, a := range actions {
		switch {
		case a.Command == "create_server" && a.Status == hcloud.ActionStatusSuccess:
			created = true
		case a.Command == "attach_to_network" && a.Status == hcloud.ActionStatusSuccess:
			attached = true
		case a.Command == startCommand && a.Status == hcloud.ActionStatusError && attached:
			// The flow's power-on failed: the server never ran.
		case a.Status == hcloud.ActionStatusError && a.Command != startCommand:
		default:
			return false, nil
		}
	}
	return created, nil
}

// history reads a server's action history (GET /servers/{id}/actions)
// and says whether it proves that the server never started.
func (p *Pool) history(ctx context.Context, s *hcloud.Server) (historyVerdict, error) {
	actions, err := p.serverActions(ctx, s)
	if err != nil {
		return historyStarted, err
	}
	created, starting := false, false
	for _, a := range actions {
		if a.Command == "create_server" {
			created = true
		}
		switch {
		case createCommands[a.Command] || a.Status == hcloud.ActionStatusError:
		case a.Status == hcloud.ActionStatusRunning:
			starting = true
		default:
			return historyStarted, nil
		}
	}
	switch {
	case !created:
		return historyStarted, nil
	case starting:
		return historyStarting, nil
	}
	return historyNeverStarted, nil
}
