package hcloudtest_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestActionsGetAndList(t *testing.T) {
	_, client, clock := newFake(t,
		hcloudtest.WithActionDuration("create_server", 2*time.Second),
		hcloudtest.WithActionDuration("start_server", 2*time.Second))
	ctx := t.Context()
	var ids []int64
	for i := range 3 {
		res := mustCreate(t, client, basicCreateOpts(fmt.Sprintf("s%d", i), nil))
		ids = append(ids, res.Action.ID, res.NextActions[0].ID)
	}

	a, _, err := client.Action.GetByID(ctx, ids[0])
	if err != nil || a == nil {
		t.Fatalf("GetByID(%d) = %v, %v", ids[0], a, err)
	}
	if a.Status != hcloud.ActionStatusRunning || a.Command != "create_server" || !a.Finished.IsZero() {
		t.Errorf("action = %s/%s finished %v; want running create_server, not finished", a.Command, a.Status, a.Finished)
	}
	if len(a.Resources) != 1 || a.Resources[0].Type != hcloud.ActionResourceTypeServer {
		t.Errorf("resources = %+v; want one server", a.Resources)
	}
	missing, _, err := client.Action.GetByID(ctx, 1)
	if err != nil || missing != nil {
		t.Errorf("GetByID(1) = %v, %v; want nil, nil", missing, err)
	}

	clock.Advance(2 * time.Second) // creates done, starts running
	list, err := client.Action.AllWithOpts(ctx, hcloud.ActionListOpts{ID: ids, Sort: []string{"status", "id:desc"}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Command string
		Status  hcloud.ActionStatus
	}
	var got []row
	for _, a := range list {
		got = append(got, row{a.Command, a.Status})
	}
	want := []row{
		{"start_server", "running"}, {"start_server", "running"}, {"start_server", "running"},
		{"create_server", "success"}, {"create_server", "success"}, {"create_server", "success"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions sorted by status, id:desc (-want +got):\n%s", diff)
	}

	running, err := client.Action.AllWithOpts(ctx, hcloud.ActionListOpts{ID: ids, Status: []hcloud.ActionStatus{hcloud.ActionStatusRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 3 {
		t.Errorf("running actions = %d; want 3", len(running))
	}
	_, resp, err := client.Action.List(ctx, hcloud.ActionListOpts{})
	if !hcloud.IsError(err, hcloud.ErrorDeprecatedAPIEndpoint) || resp.StatusCode != http.StatusGone {
		t.Errorf("List without id error = %v; want 410 deprecated_api_endpoint", err)
	}
}

func TestWaitForChunksOf25(t *testing.T) {
	s, client, clock := newFake(t, hcloudtest.WithActionDuration("create_server", time.Second))
	var actions []*hcloud.Action
	for i := range 30 {
		opts := basicCreateOpts(fmt.Sprintf("w%d", i), nil)
		opts.StartAfterCreate = ptr(false)
		actions = append(actions, mustCreate(t, client, opts).Action)
	}
	s.ResetCounts()
	clock.Advance(time.Second)
	if err := client.Action.WaitFor(t.Context(), actions...); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Count("GET /actions"), 2; got != want {
		t.Errorf("GET /actions = %d; want %d (30 IDs in chunks of 25, one tick)", got, want)
	}
}

func TestFailedActions(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		start      bool
		wantStatus hcloud.ServerStatus
	}{
		{name: "create fails, start follows", command: "create_server", start: true, wantStatus: hcloud.ServerStatusOff},
		{name: "create fails", command: "create_server", start: false, wantStatus: hcloud.ServerStatusOff},
		{name: "start fails", command: "start_server", start: true, wantStatus: hcloud.ServerStatusOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, clock := newFake(t)
			s.FailAction(tt.command, "placement_error", "no host found")
			opts := basicCreateOpts("doomed", nil)
			opts.StartAfterCreate = ptr(tt.start)
			res := mustCreate(t, client, opts)
			err := waitFor(t, client, clock, append([]*hcloud.Action{res.Action}, res.NextActions...)...)
			var aerr hcloud.ActionError
			if !errors.As(err, &aerr) || aerr.Code != "placement_error" || aerr.Message != "no host found" {
				t.Fatalf("WaitFor error = %v; want ActionError placement_error", err)
			}
			srv, _, err := client.Server.GetByID(t.Context(), res.Server.ID)
			if err != nil || srv == nil {
				t.Fatalf("server after failed action = %v, %v; want it to exist", srv, err)
			}
			if srv.Status != tt.wantStatus {
				t.Errorf("status = %q; want %q", srv.Status, tt.wantStatus)
			}
			clock.Advance(time.Minute) // let the next actions reach their due time
			for _, a := range res.NextActions {
				got, _, _ := client.Action.GetByID(t.Context(), a.ID)
				if got.Status != hcloud.ActionStatusError {
					t.Errorf("next action %s status = %q; want error", got.Command, got.Status)
				}
			}
		})
	}
}

func TestPowerActions(t *testing.T) {
	s, client, clock := newFake(t,
		hcloudtest.WithDefaultActionDuration(time.Second))
	ctx := t.Context()
	opts := basicCreateOpts("power", nil)
	opts.StartAfterCreate = ptr(false)
	res := mustCreate(t, client, opts)
	srv := res.Server

	_, _, err := client.Server.Poweron(ctx, srv)
	if !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
		t.Fatalf("Poweron during create error = %v; want locked", err)
	}
	clock.Advance(time.Second)

	steps := []struct {
		name   string
		call   func() (*hcloud.Action, *hcloud.Response, error)
		during hcloud.ServerStatus
		after  hcloud.ServerStatus
	}{
		{"start_server", func() (*hcloud.Action, *hcloud.Response, error) { return client.Server.Poweron(ctx, srv) }, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning},
		{"shutdown_server", func() (*hcloud.Action, *hcloud.Response, error) { return client.Server.Shutdown(ctx, srv) }, hcloud.ServerStatusStopping, hcloud.ServerStatusOff},
		{"start_server", func() (*hcloud.Action, *hcloud.Response, error) { return client.Server.Poweron(ctx, srv) }, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning},
		{"stop_server", func() (*hcloud.Action, *hcloud.Response, error) { return client.Server.Poweroff(ctx, srv) }, hcloud.ServerStatusStopping, hcloud.ServerStatusOff},
	}
	for i, st := range steps {
		a, _, err := st.call()
		if err != nil {
			t.Fatalf("step %d %s: %v", i, st.name, err)
		}
		if a.Command != st.name {
			t.Errorf("step %d: command = %q; want %q", i, a.Command, st.name)
		}
		info, _ := s.ServerByID(srv.ID)
		if info.Status != st.during {
			t.Errorf("step %d %s: status while running = %q; want %q", i, st.name, info.Status, st.during)
		}
		clock.Advance(time.Second)
		info, _ = s.ServerByID(srv.ID)
		if info.Status != st.after {
			t.Errorf("step %d %s: status after = %q; want %q", i, st.name, info.Status, st.after)
		}
	}
	if got := s.Count("POST /servers/{id}/actions/poweron"); got != 3 {
		t.Errorf("poweron requests = %d; want 3 (one refused as locked)", got)
	}
}

func TestDeleteTwiceIsLocked(t *testing.T) {
	s, client, _ := newFake(t)
	id, err := s.AddServer(hcloudtest.ServerInfo{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: id}); err != nil {
		t.Fatal(err)
	}
	_, _, err = client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: id})
	if !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
		t.Errorf("second delete error = %v; want locked", err)
	}
	_, _, err = client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: 1})
	if !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Errorf("delete of unknown server error = %v; want not_found", err)
	}
}

func TestFailedDeleteRestoresStatus(t *testing.T) {
	s, client, clock := newFake(t)
	id, err := s.AddServer(hcloudtest.ServerInfo{Name: "stays", Status: hcloud.ServerStatusOff})
	if err != nil {
		t.Fatal(err)
	}
	s.FailAction("delete_server", "server_error", "")
	res, _, err := client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(t, client, clock, res.Action)
	var aerr hcloud.ActionError
	if !errors.As(err, &aerr) || aerr.Code != "server_error" {
		t.Fatalf("WaitFor error = %v; want ActionError server_error", err)
	}
	info, ok := s.ServerByID(id)
	if !ok || info.Status != hcloud.ServerStatusOff {
		t.Errorf("server after failed delete = %+v, %v; want it off", info, ok)
	}
}

func TestSetActionDurationAppliesToLaterActions(t *testing.T) {
	fake, client, clock := newFake(t, hcloudtest.WithActionDuration("create_server", 2*time.Second))
	ctx := t.Context()
	before := mustCreate(t, client, basicCreateOpts("before", nil)).Action
	fake.SetActionDuration("create_server", 10*time.Second)
	after := mustCreate(t, client, basicCreateOpts("after", nil)).Action
	clock.Advance(2 * time.Second)
	for _, tt := range []struct {
		action *hcloud.Action
		want   hcloud.ActionStatus
	}{{before, hcloud.ActionStatusSuccess}, {after, hcloud.ActionStatusRunning}} {
		a, _, err := client.Action.GetByID(ctx, tt.action.ID)
		if err != nil || a == nil {
			t.Fatalf("GetByID(%d) = %v, %v", tt.action.ID, a, err)
		}
		if a.Status != tt.want {
			t.Errorf("action %d after 2 s = %s; want %s (durations change only later actions)", a.ID, a.Status, tt.want)
		}
	}
	clock.Advance(8 * time.Second)
	if a, _, err := client.Action.GetByID(ctx, after.ID); err != nil || a.Status != hcloud.ActionStatusSuccess || a.Finished.Sub(a.Started) != 10*time.Second {
		t.Errorf("action %d after 10 s = %+v, %v; want success after 10 s", after.ID, a, err)
	}
}

func TestForgetActions(t *testing.T) {
	clock := hcloudtest.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := hcloudtest.NewServer(hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0))
	defer s.Close()
	client := s.Client()
	id, err := s.AddServer(hcloudtest.ServerInfo{Name: "w-1", Status: hcloud.ServerStatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.ForgetActions(id); n != 1 {
		t.Fatalf("ForgetActions(%d) = %d; want 1", id, n)
	}
	if a, _, err := client.Action.GetByID(t.Context(), res.Action.ID); err != nil || a != nil {
		t.Errorf("GetByID(forgotten action) = %v, %v; want nil, nil (not found)", a, err)
	}
	clock.Advance(time.Hour)
	info, ok := s.ServerByID(id)
	if !ok || info.Status != hcloud.ServerStatusRunning {
		t.Errorf("server after its forgotten delete: %+v, exists %t; want it running as before", info, ok)
	}
}

// A server's actions are listed under the server, from its create on, with
// the status filter, and a server that does not exist is not_found.
func TestServerActions(t *testing.T) {
	_, client, clock := newFake(t,
		hcloudtest.WithActionDuration("create_server", time.Second),
		hcloudtest.WithActionDuration("start_server", time.Second),
		hcloudtest.WithActionDuration("stop_server", time.Second))
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("mine", nil))
	other := mustCreate(t, client, basicCreateOpts("other", nil))
	clock.Advance(2 * time.Second)
	if _, _, err := client.Server.Poweroff(ctx, res.Server); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Command string
		Status  hcloud.ActionStatus
	}
	rows := func(status ...hcloud.ActionStatus) []row {
		t.Helper()
		list, err := client.Server.Action.AllFor(ctx, res.Server, hcloud.ActionListOpts{Status: status})
		if err != nil {
			t.Fatal(err)
		}
		var got []row
		for _, a := range list {
			got = append(got, row{a.Command, a.Status})
		}
		return got
	}
	want := []row{{"create_server", "success"}, {"start_server", "success"}, {"stop_server", "running"}}
	if diff := cmp.Diff(want, rows()); diff != "" {
		t.Errorf("actions of the server (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:2], rows(hcloud.ActionStatusSuccess)); diff != "" {
		t.Errorf("successful actions of the server (-want +got):\n%s", diff)
	}
	if list, err := client.Server.Action.AllFor(ctx, other.Server, hcloud.ActionListOpts{}); err != nil || len(list) != 2 {
		t.Errorf("actions of the other server = %d, %v; want its create and start", len(list), err)
	}
	_, _, err := client.Server.Action.ListFor(ctx, &hcloud.Server{ID: 1}, hcloud.ActionListOpts{})
	if !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Errorf("actions of a server that does not exist: error %v; want not_found", err)
	}
}
