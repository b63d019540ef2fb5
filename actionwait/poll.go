package actionwait

import (
	"context"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
)

// loop starts the polls. It never waits for a poll's requests: each
// runs on its own (requests), and loop waits for them only when it ends,
// so that no goroutine outlives Close.
func (w *Waiter) loop(ctx context.Context) {
	defer close(w.done)
	defer w.requests.Wait()
	for {
		w.mu.Lock()
		at, ok := w.nextPollLocked()
		now := w.clock.Now()
		w.mu.Unlock()
		if !ok {
			// Nothing to poll, or everything is in a request on the
			// wire: a new Wait or an answered request wakes us.
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		if d := at.Sub(now); d > 0 {
			select {
			case <-w.clock.After(d):
			case <-w.wake:
				continue // a new action may be due sooner
			case <-w.stop:
				return
			}
		}
		w.poll(ctx, at)
	}
}

// nextPollLocked returns when to poll next: when the first action is due,
// or later by up to one interval to take along the others due by then
// (actions started together finish together), and never sooner than one
// interval after the last poll. Actions in a request on the wire are not
// due. ok is false when no action is left to poll.
func (w *Waiter) nextPollLocked() (at time.Time, ok bool) {
	var first time.Time
	for id, t := range w.byID {
		if !w.inFlight[id] && (first.IsZero() || t.next.Before(first)) {
			first = t.next
		}
	}
	if first.IsZero() {
		return time.Time{}, false
	}
	at = first
	for id, t := range w.byID {
		if !w.inFlight[id] && t.next.After(at) && !t.next.After(first.Add(w.interval)) {
			at = t.next
		}
	}
	if !w.lastPoll.IsZero() {
		if earliest := w.lastPoll.Add(w.interval); at.Before(earliest) {
			at = earliest
		}
	}
	return at, true
}

// pollRun is what the requests of one poll share: the commands of which
// some action finished (a batch finishing), and the actions still running
// that each request rescheduled, by command. Guarded by Waiter.mu.
type pollRun struct {
	start    time.Time
	finished map[string]bool
	running  map[string][]int64
}

// poll lists every action due by at that no request on the wire asks for,
// one request per actionsPerRequest IDs, each sent on its own. It does not
// wait for them: each request, as it answers or fails, wakes the callers
// it answers for and schedules its own actions, so that a hung request
// holds back only the actions it asked for, and the next poll of the
// others goes out on schedule.
func (w *Waiter) poll(ctx context.Context, at time.Time) {
	w.mu.Lock()
	start := w.clock.Now()
	w.lastPoll = start
	if w.pollHook != nil {
		w.pollHook(start)
	}
	var ids []int64
	for id, t := range w.byID {
		if !w.inFlight[id] && !t.next.After(at) {
			ids = append(ids, id)
			w.inFlight[id] = true
		}
	}
	w.mu.Unlock()
	slices.Sort(ids)

	run := &pollRun{start: start, finished: map[string]bool{}, running: map[string][]int64{}}
	for chunk := range slices.Chunk(ids, actionsPerRequest) {
		w.requests.Go(func() { w.request(ctx, run, chunk) })
	}
}

// request sends one request of a poll and settles its answer: it wakes
// the callers of the actions that finished or vanished and schedules the
// ones still running, or, when it failed, all of its actions one interval
// after the poll began. Then its actions may be polled again.
func (w *Waiter) request(ctx context.Context, run *pollRun, chunk []int64) {
	defer func() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}()
	actions, err := w.list(ctx, chunk)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("polling actions failed; retrying after the poll interval",
				zap.Int("actions", len(chunk)), zap.Error(err))
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, id := range chunk {
			delete(w.inFlight, id)
			if t := w.byID[id]; t != nil {
				t.polls++
				t.next = run.start.Add(w.interval)
			}
		}
		return
	}
	running, newlyFinished := w.settle(chunk, actions, run.finished)

	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.clock.Now()
	for _, id := range chunk {
		delete(w.inFlight, id)
	}
	for _, a := range running {
		t := w.byID[a.ID]
		if t == nil {
			continue // its callers gave up while we polled
		}
		t.polls++
		// From the end of the request: the progress may be read late in
		// it, and later is the safe side.
		t.next = end.Add(w.gapLocked(t, a, end, run.finished[t.command]))
		run.running[t.command] = append(run.running[t.command], a.ID)
	}
	// A batch is finishing: the running actions of its commands that
	// other requests of the poll answered for are polled again one
	// interval from now, as if one request had answered for all.
	for _, command := range newlyFinished {
		for _, id := range run.running[command] {
			if t := w.byID[id]; t != nil && !w.inFlight[id] && t.next.After(end.Add(w.interval)) {
				t.next = end.Add(w.interval)
			}
		}
	}
}

// settle settles the answer to one request of a poll: it wakes the
// callers of the finished and the vanished actions among ids, adds the
// commands of the finished ones to finished (guarded by w.mu), and
// returns the actions still running and the commands it added.
func (w *Waiter) settle(ids []int64, actions []*hcloud.Action, finished map[string]bool) (running []*hcloud.Action, added []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.clock.Now()
	byID := make(map[int64]*hcloud.Action, len(actions))
	for _, a := range actions {
		if a != nil {
			byID[a.ID] = a
		}
	}
	for _, id := range ids {
		a := byID[id]
		if a != nil && a.Status == hcloud.ActionStatusRunning {
			running = append(running, a)
			continue
		}
		t := w.byID[id]
		if t == nil {
			continue // its callers gave up while we polled
		}
		t.polls++
		if a == nil {
			w.log.Warn("action not found", zap.Int64("action", id))
			w.resolveLocked(id, &NotFoundError{ID: id})
			continue
		}
		if !finished[t.command] {
			finished[t.command] = true
			added = append(added, t.command)
		}
		w.finishedLocked(t, a, seen)
		w.resolveLocked(id, a.Error())
	}
	return running, added
}

// gapLocked returns how long to wait before polling a running action
// again: one interval while others of its command are finishing; else
// the time its progress says it still needs, or half the time it has run
// when the API reports no progress; never less than one interval or more
// than MaxGapIntervals.
func (w *Waiter) gapLocked(t *tracked, a *hcloud.Action, now time.Time, finishing bool) time.Duration {
	if finishing {
		return w.interval
	}
	age := now.Sub(t.since)
	gap := age / 2
	if a.Progress > 0 && a.Progress < 100 {
		gap = age * time.Duration(100-a.Progress) / time.Duration(a.Progress)
	}
	return min(max(gap, w.interval), MaxGapIntervals*w.interval)
}

// finishedLocked learns from a finished action and reports it. Its
// duration is the API's (finished minus started), but no more than the
// waiter saw pass since the first Wait, which guards against a skewed
// clock of the API; when the API's times are missing or impossible
// (finished before started), it is what the waiter saw. Failed actions
// teach nothing: failures can be quick.
func (w *Waiter) finishedLocked(t *tracked, a *hcloud.Action, seen time.Time) {
	w.metrics.ActionPolls.WithLabelValues(t.command).Observe(float64(t.polls))
	if a.Status != hcloud.ActionStatusSuccess {
		return
	}
	d := seen.Sub(t.since)
	if !a.Started.IsZero() && !a.Finished.IsZero() && !a.Finished.Before(a.Started) {
		d = min(d, a.Finished.Sub(a.Started))
	}
	d = max(d, 0)
	w.learnLocked(t, d)
	w.metrics.ActionDuration.WithLabelValues(t.command).Observe(d.Seconds())
}

func (w *Waiter) list(ctx context.Context, ids []int64) ([]*hcloud.Action, error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	opts := hcloud.ActionListOpts{
		ListOpts: hcloud.ListOpts{Page: 1, PerPage: actionsPerRequest},
		ID:       ids,
	}
	var all []*hcloud.Action
	for {
		w.metrics.ActionPollRequests.Inc()
		actions, resp, err := w.api.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, actions...)
		// One page holds every ID we ask for; follow further pages anyway
		// should the API ever page smaller.
		if resp == nil || resp.Meta.Pagination == nil || resp.Meta.Pagination.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.Meta.Pagination.NextPage
	}
}

func (w *Waiter) resolveLocked(id int64, err error) {
	t := w.byID[id]
	if t == nil {
		return
	}
	for _, c := range t.calls {
		if err != nil {
			c.errs = append(c.errs, err)
		}
		c.remaining--
		if c.remaining == 0 {
			close(c.done)
		}
	}
	delete(w.byID, id)
}

func (w *Waiter) finishLocked(c *waitCall, err error) {
	select {
	case <-c.done:
		return
	default:
	}
	c.errs = append(c.errs, err)
	c.remaining = 0
	close(c.done)
}
