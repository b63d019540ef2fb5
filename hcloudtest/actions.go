package hcloudtest

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// Action status values of the API.
const (
	actionRunning = "running"
	actionSuccess = "success"
	actionError   = "error"
)

// actionRec is an asynchronous operation. It completes when the clock
// reaches due; its effect on the resources is applied then, so every
// observable state change is driven by the clock.
type actionRec struct {
	id        int64
	command   string
	started   time.Time
	due       time.Time
	finished  time.Time
	status    string
	errCode   string
	errMsg    string
	resources []schema.ActionResourceReference
	fail      *actionFault // planned failure
	parent    *actionRec   // a next action fails with its parent
	onSuccess func()
	onError   func()
}

// startAction records a running action. after, when set, is the action this
// one follows (next_actions run after the create), so it starts when that
// one would finish.
func (st *state) startAction(command string, now time.Time, after *actionRec, resources ...schema.ActionResourceReference) *actionRec {
	start := now
	if after != nil && after.due.After(start) {
		start = after.due
	}
	a := &actionRec{
		id:        st.nextID("action"),
		command:   command,
		started:   now,
		due:       start.Add(st.cfg.duration(command)),
		status:    actionRunning,
		resources: resources,
		fail:      st.faults.takeActionFault(command),
		parent:    after,
	}
	st.actions[a.id] = a
	i, _ := slices.BinarySearchFunc(st.running, a, compareDue)
	st.running = slices.Insert(st.running, i, a)
	return a
}

func compareDue(a, b *actionRec) int {
	if c := a.due.Compare(b.due); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// advance completes, in due order, every running action whose time has
// come. It runs at the start of every request and state accessor, so the
// project is always observed as of the clock's current time.
func (st *state) advance(now time.Time) {
	st.now = now
	n := 0
	for n < len(st.running) && !st.running[n].due.After(now) {
		a := st.running[n]
		n++
		a.finished = a.due
		switch {
		case a.fail != nil:
			a.status, a.errCode, a.errMsg = actionError, a.fail.code, a.fail.message
		case a.parent != nil && a.parent.status == actionError:
			a.status, a.errCode, a.errMsg = actionError, a.parent.errCode, a.parent.errMsg
		default:
			a.status = actionSuccess
		}
		if a.status == actionSuccess && a.onSuccess != nil {
			a.onSuccess()
		}
		if a.status == actionError && a.onError != nil {
			a.onError()
		}
		a.onSuccess, a.onError = nil, nil
	}
	st.running = slices.Delete(st.running, 0, n)
}

// lockedBy reports whether a running action touches the resource.
func (st *state) lockedBy(kind string, id int64) bool {
	for _, a := range st.running {
		for _, r := range a.resources {
			if r.Type == kind && r.ID == id {
				return true
			}
		}
	}
	return false
}

func (a *actionRec) schema(now time.Time) schema.Action {
	out := schema.Action{
		ID:        a.id,
		Status:    a.status,
		Command:   a.command,
		Started:   a.started,
		Resources: slices.Clone(a.resources),
	}
	if out.Resources == nil {
		out.Resources = []schema.ActionResourceReference{}
	}
	switch a.status {
	case actionRunning:
		total := a.due.Sub(a.started)
		if total > 0 {
			out.Progress = min(99, int(now.Sub(a.started)*100/total))
		}
	default:
		out.Progress = 100
		finished := a.finished
		out.Finished = &finished
	}
	if a.status == actionError {
		out.Error = &schema.ActionError{Code: a.errCode, Message: a.errMsg}
	}
	return out
}

func ref(kind string, id int64) schema.ActionResourceReference {
	return schema.ActionResourceReference{ID: id, Type: kind}
}

func handleGetAction(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	a, ok := s.st.actions[id]
	if !ok {
		return response{}, notFound("action")
	}
	return ok200(schema.ActionGetResponse{Action: a.schema(r.now)}), nil
}

var actionSorts = map[string]func(a, b *actionRec) int{
	"id":       func(a, b *actionRec) int { return cmp.Compare(a.id, b.id) },
	"command":  func(a, b *actionRec) int { return cmp.Compare(a.command, b.command) },
	"status":   func(a, b *actionRec) int { return cmp.Compare(a.status, b.status) },
	"started":  func(a, b *actionRec) int { return a.started.Compare(b.started) },
	"finished": func(a, b *actionRec) int { return a.finished.Compare(b.finished) },
}

// idFilter parses the id parameters of an action list.
func idFilter(r *request) (map[int64]bool, *apiError) {
	want := map[int64]bool{}
	for _, v := range r.query["id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, invalidField("id", "%q is not an integer", v)
		}
		want[id] = true
	}
	return want, nil
}

// handleListActions answers GET /actions. Listing without an id filter
// was removed on 2025-01-30.
func handleListActions(s *Server, r *request) (response, *apiError) {
	ids := r.query["id"]
	if len(ids) == 0 {
		return response{}, removedEndpoint(actionsListAnnouncement)
	}
	want, err := idFilter(r)
	if err != nil {
		return response{}, err
	}
	statuses := r.query["status"]
	var list []*actionRec
	for id := range want {
		a, ok := s.st.actions[id]
		if !ok || (len(statuses) > 0 && !slices.Contains(statuses, a.status)) {
			continue
		}
		list = append(list, a)
	}
	return actionPage(r, list)
}

// actionPage answers a list of actions: sorted as the request asks, one
// page of them.
func actionPage(r *request, list []*actionRec) (response, *apiError) {
	if err := sortList(list, r.query["sort"], actionSorts); err != nil {
		return response{}, err
	}
	page, meta, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]schema.Action, len(page))
	for i, a := range page {
		out[i] = a.schema(r.now)
	}
	return ok200(map[string]any{"actions": out, "meta": meta}), nil
}
