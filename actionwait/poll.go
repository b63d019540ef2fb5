package actionwait

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
)

func (w *Waiter) loop(ctx context.Context) {
	defer close(w.done)
	for {
		w.mu.Lock()
		idle := len(w.byID) == 0
		var at, now time.Time
		if !idle {
			now = w.clock.Now()
			at = w.nextPollLocked()
		}
		w.mu.Unlock()
		if idle {
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
// interval after the last poll.
func (w *Waiter) nextPollLocked() time.Time {
	var first time.Time
	for _, t := range w.byID {
		if first.IsZero() || t.next.Before(first) {
			first = t.next
		}
	}
	at := first
	for _, t := range w.byID {
		if t.next.After(at) && !t.next.After(first.Add(w.interval)) {
			at = t.next
		}
	}
	if !w.lastPoll.IsZero() {
		if earliest := w.lastPoll.Add(w.interval); at.Before(earliest) {
			at = earliest
		}
	}
	return at
}

// poll lists every action due by at, one request per actionsPerRequest
// IDs, sent concurrently, and schedules the ones still running. The
// callers of the finished actions are woken as each request answers, so
// that a slow request holds back only the actions it asked for.
func (w *Waiter) poll(ctx context.Context, at time.Time) {
	w.mu.Lock()
	start := w.clock.Now()
	w.lastPoll = start
	if w.pollHook != nil {
		w.pollHook(start)
	}
	var ids []int64
	for id, t := range w.byID {
		if !t.next.After(at) {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	slices.Sort(ids)

	chunks := slices.Collect(slices.Chunk(ids, actionsPerRequest))
	running := make([][]*hcloud.Action, len(chunks))
	failed := make([]bool, len(chunks))
	finished := map[string]bool{} // commands of which this poll saw some finish; guarded by w.mu
	var wg sync.WaitGroup
	for i, chunk := range chunks {
		wg.Go(func() {
			actions, err := w.list(ctx, chunk)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("polling actions failed; retrying after the poll interval",
						zap.Int("actions", len(chunk)), zap.Error(err))
				}
				failed[i] = true
				return
			}
			running[i] = w.settle(chunk, actions, finished)
		})
	}
	wg.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.clock.Now()
	for i, chunk := range chunks {
		if failed[i] {
			for _, id := range chunk {
				if t := w.byID[id]; t != nil {
					t.polls++
					t.next = start.Add(w.interval)
				}
			}
			continue
		}
		for _, a := range running[i] {
			t := w.byID[a.ID]
			if t == nil {
				continue // its callers gave up while we polled
			}
			t.polls++
			// From the end of the poll: the progress may be read late in
			// the request, and later is the safe side.
			t.next = end.Add(w.gapLocked(t, a, end, finished[t.command]))
		}
	}
}

// settle settles the answer to one request of a
// poll: it wakes the callers of the finished and the vanished actions
// among ids, adds the commands of the finished ones to finished, and
// returns the actions still running.
func (w *Waiter) settle(ids []int64, actions []*hcloud.Action, finished map[string]bool) []*hcloud.Action {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.clock.Now()
	byID := make(map[int64]*hcloud.Action, len(actions))
	for _, a := range actions {
		if a != nil {
			byID[a.ID] = a
		}
	}
	var running []*hcloud.Action
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
		finished[t.command] = true
		w.finishedLocked(t, a, seen)
		w.resolveLocked(id, a.Error())
	}
	return running
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
