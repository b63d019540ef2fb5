package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/servercache"
)

func TestServerStateMapsEveryStatus(t *testing.T) {
	const timeout = 5 * time.Minute
	now := epoch
	young, old := now.Add(-time.Minute), now.Add(-timeout-time.Second)
	notStarted := &ErrorInfo{Class: Other, Code: CodeNotStarted}
	// Only initializing proves that a server never ran; every other
	// status can follow a boot, so it is never a failed creation,
	// however old the server, in pools with or without a subnet range
	// (the state does not depend on how the pool creates servers). Only
	// a failed creation carries error info.
	tests := []struct {
		status    hcloud.ServerStatus
		created   time.Time
		wantState State
		wantErr   *ErrorInfo
	}{
		{status: hcloud.ServerStatusInitializing, created: young, wantState: Creating},
		{status: hcloud.ServerStatusInitializing, created: old, wantState: Creating, wantErr: notStarted},
		{status: hcloud.ServerStatusStarting, created: young, wantState: Running},
		{status: hcloud.ServerStatusStarting, created: old, wantState: Running},
		{status: hcloud.ServerStatusRunning, created: young, wantState: Running},
		{status: hcloud.ServerStatusRunning, created: old, wantState: Running},
		{status: hcloud.ServerStatusOff, created: young, wantState: Running},
		{status: hcloud.ServerStatusOff, created: old, wantState: Running},
		{status: hcloud.ServerStatusStopping, created: old, wantState: Running},
		{status: hcloud.ServerStatusMigrating, created: old, wantState: Running},
		{status: hcloud.ServerStatusRebuilding, created: old, wantState: Running},
		{status: hcloud.ServerStatusDeleting, created: old, wantState: Deleting},
		{status: hcloud.ServerStatusUnknown, created: young, wantState: Running},
		{status: hcloud.ServerStatusUnknown, created: old, wantState: Running},
		{status: "hibernating", created: old, wantState: Running},
	}
	ignoreMessage := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Message" }, cmp.Ignore())
	for _, tt := range tests {
		name := string(tt.status)
		if tt.created.Equal(old) {
			name += "/old"
		}
		t.Run(name, func(t *testing.T) {
			s := &servercache.Server{ID: 1, Name: "w-1", Status: tt.status, Created: tt.created}
			state, info := serverState(s, now, timeout)
			if state != tt.wantState {
				t.Errorf("state = %s; want %s", state, tt.wantState)
			}
			if diff := cmp.Diff(tt.wantErr, info, ignoreMessage); diff != "" {
				t.Errorf("error info (-want +got):\n%s", diff)
			}
			if info != nil && info.Message == "" {
				t.Error("error info without a message")
			}
		})
	}
}

func TestInstancesFromListedServers(t *testing.T) {
	e := newEnv(t, envOptions{})
	labels := map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster}
	own := config.Offering{ServerType: "cx23", Location: "fsn1"}
	add := func(name string, status hcloud.ServerStatus, created time.Time, o config.Offering) int64 {
		id, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: name, Status: status, Created: created, Labels: labels, ServerType: o.ServerType, Location: o.Location})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	running := add("w-running", hcloud.ServerStatusRunning, epoch.Add(-time.Hour), own)
	fresh := add("w-fresh", hcloud.ServerStatusInitializing, epoch.Add(-time.Minute), own)
	stuck := add("w-stuck", hcloud.ServerStatusInitializing, epoch.Add(-time.Hour), own)
	// A server whose type someone changed runs on another offering.
	moved := config.Offering{ServerType: "cx33", Location: "nbg1"}
	off := add("w-off", hcloud.ServerStatusOff, epoch.Add(-time.Hour), moved)
	gone := add("w-deleting", hcloud.ServerStatusDeleting, epoch.Add(-time.Hour), own)
	if _, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "other-cluster", Labels: map[string]string{
		config.LabelNodeGroup: "workers", config.LabelCluster: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}

	// At min: only the failed creation may go.
	p := e.newPool(poolConfig("workers", 4, 10))
	if _, err := e.cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := p.Instances()
	pid := func(id int64) string { return "hcloud://" + itoa(id) }
	want := []Instance{
		{ID: pid(running), State: Running, ServerID: running, Name: "w-running", Status: hcloud.ServerStatusRunning, Offering: own},
		{ID: pid(fresh), State: Creating, ServerID: fresh, Name: "w-fresh", Status: hcloud.ServerStatusInitializing, Offering: own},
		{ID: pid(stuck), State: Creating, ServerID: stuck, Name: "w-stuck", Status: hcloud.ServerStatusInitializing,
			Error: &ErrorInfo{Class: Other, Code: CodeNotStarted}, Offering: own},
		{ID: pid(off), State: Running, ServerID: off, Name: "w-off", Status: hcloud.ServerStatusOff, Offering: moved},
		{ID: pid(gone), State: Deleting, ServerID: gone, Name: "w-deleting", Status: hcloud.ServerStatusDeleting, Offering: own},
	}
	ignoreMessage := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Message" }, cmp.Ignore())
	if diff := cmp.Diff(want, got, ignoreMessage); diff != "" {
		t.Errorf("Instances() (-want +got):\n%s", diff)
	}
	if got := p.TargetSize(); got != 4 {
		t.Errorf("TargetSize() = %d; want 4 (the deleting server does not count)", got)
	}
	// The autoscaler deletes the stuck server like a failed creation,
	// without a min-size cap; a healthy server stays protected.
	if err := p.DeleteInstances(t.Context(), []string{pid(fresh)}); err == nil {
		t.Error("DeleteInstances(fresh) at min = nil; want a min-size error")
	}
	if err := p.DeleteInstances(t.Context(), []string{pid(stuck)}); err != nil {
		t.Fatalf("DeleteInstances(stuck) at min error: %v", err)
	}
	e.settle(p)
	if _, ok := e.fake.ServerByID(stuck); ok {
		t.Error("the stuck server still exists")
	}
}

func TestRestartedPoolSeesTheSameState(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("workers", 0, 10)
	a := e.newPool(cfg)
	if err := a.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	e.settle(a)
	// One more server mid-create when the process stops.
	if err := a.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.eventually("the fourth server to exist", 0, func() bool {
		n := 0
		for _, in := range a.Instances() {
			if in.ServerID != 0 && in.State == Creating {
				n++
			}
		}
		return n == 1
	})
	wantTarget := a.TargetSize()
	wantInstances := a.Instances()
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	_ = a.Close(stopped) // gives up at once: the create flow is cancelled

	// A new process: new cache, new pool, same project.
	cache := e.newCache()
	deps := e.deps(cfg)
	deps.Cache = cache
	b := e.newPoolWith(cfg, deps)
	if _, err := cache.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.TargetSize(); got != wantTarget || got != 4 {
		t.Errorf("restarted TargetSize() = %d; want %d (4)", got, wantTarget)
	}
	if diff := cmp.Diff(wantInstances, b.Instances()); diff != "" {
		t.Errorf("restarted Instances() (-before +after):\n%s", diff)
	}
	if got := len(e.servers("workers")); got != 4 {
		t.Errorf("servers = %d; want 4: the cancelled flow leaves its server", got)
	}
}

func TestStatusSummarises(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 1, 10, 2)
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "placement_error", Message: "no room"})
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	st := p.Status()
	want := Status{Name: "workers", MinSize: 1, MaxSize: 10, Target: 3, Running: 2, Creating: 1, Failed: 1}
	if diff := cmp.Diff(want, st, cmp.FilterPath(func(p cmp.Path) bool {
		return p.String() == "Errors" || p.String() == "Unavailable"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("Status() (-want +got):\n%s", diff)
	}
	if len(st.Errors) != 1 || st.Errors[0].Error.Code != "placement_error" {
		t.Errorf("Status().Errors = %+v; want the placement_error placeholder", st.Errors)
	}
	if len(st.Unavailable) != 1 || st.Unavailable[0].Code != "placement_error" {
		t.Errorf("Status().Unavailable = %+v; want cx23 in fsn1 after placement_error", st.Unavailable)
	}
}

// TestServerThatRanIsNeverAFailedCreation takes a node that has run for a
// day through every status a power cycle, reset, shutdown, rebuild,
// migration or status flicker shows, in pools with and without a subnet
// range: it is never Creating with an error (which the autoscaler deletes
// without drain), and at min size DeleteInstances refuses to delete it.
func TestServerThatRanIsNeverAFailedCreation(t *testing.T) {
	statuses := []hcloud.ServerStatus{
		hcloud.ServerStatusStopping, hcloud.ServerStatusOff, hcloud.ServerStatusStarting,
		hcloud.ServerStatusRebuilding, hcloud.ServerStatusMigrating, hcloud.ServerStatusUnknown,
		hcloud.ServerStatusRunning,
	}
	for _, subnet := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "subnet"}[subnet], func(t *testing.T) {
			e := newEnv(t, envOptions{})
			cfg := poolConfig("workers", 1, 3)
			if subnet {
				e.addReferences()
				cfg.Network, cfg.SubnetIPRange = "net", mustPrefix("10.0.1.0/24")
			}
			id, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "w-old", Status: hcloud.ServerStatusRunning,
				Created: epoch.Add(-24 * time.Hour), Labels: cfg.ServerLabels})
			if err != nil {
				t.Fatal(err)
			}
			p := e.newPool(cfg)
			for _, status := range statuses {
				if err := e.fake.SetServerStatus(id, status); err != nil {
					t.Fatal(err)
				}
				if _, err := e.cache.Refresh(t.Context()); err != nil {
					t.Fatal(err)
				}
				ins := p.Instances()
				if len(ins) != 1 || ins[0].State != Running || ins[0].Status != status {
					t.Fatalf("%s: Instances() = %+v; want the server running", status, ins)
				}
				if status != hcloud.ServerStatusUnknown && ins[0].Error != nil {
					t.Errorf("%s: error info %+v; want none", status, ins[0].Error)
				}
				err := p.DeleteInstances(t.Context(), []string{ins[0].ID})
				if !errors.Is(err, ErrBelowMin) {
					t.Errorf("%s: DeleteInstances at min = %v; want ErrBelowMin", status, err)
				}
			}
			if got := len(e.servers("workers")); got != 1 {
				t.Errorf("fake holds %d servers; want the one", got)
			}
		})
	}
}
