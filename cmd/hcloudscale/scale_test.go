package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// serversOf returns the names and statuses of a pool's servers in the
// fake project, in ID order.
func serversOf(t *testing.T, p *fakeProject, pool string) []hcloudtest.ServerInfo {
	t.Helper()
	servers, err := p.api.Servers(config.LabelNodeGroup + "=" + pool)
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

func TestScaleUpAndDown(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	env := p.env(t, nil)

	r := runCmd(t, runScale, env, append([]string{"workers", "3", "--output=json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("scale workers 3 = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res := decodeJSON[scaleResult](t, r)
	want := scaleResult{Pool: "workers", From: 0, To: 3, Requested: 3, Created: 3, Deleted: []string{}, NotDeleted: []string{}, Waited: true,
		Target: 3, Running: 3, Errors: []string{}}
	if diff := cmp.Diff(want, res, cmpopts.IgnoreFields(scaleResult{}, "Seconds", "CreatedServers")); diff != "" {
		t.Errorf("scale workers 3 (-want +got):\n%s", diff)
	}
	servers := serversOf(t, p, "workers")
	if len(servers) != 3 {
		t.Fatalf("after scale workers 3 the project has %d workers, want 3", len(servers))
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff(names, res.CreatedServers, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("scale workers 3 createdServers (-want +got):\n%s", diff)
	}
	for _, s := range servers {
		// The example pool has a subnet: created stopped, attached, powered on.
		if s.Status != hcloud.ServerStatusRunning || len(s.Networks) != 1 || s.Labels[config.LabelCluster] != "prod" || s.ServerType != "cpx31" {
			t.Errorf("server %s: status %s, networks %v, labels %v, type %s; want running in the network with the cluster label, cpx31",
				s.Name, s.Status, s.Networks, s.Labels, s.ServerType)
		}
	}
	if !strings.Contains(r.stderr, "workers: creating 3 servers (target 0 -> 3)") || !strings.Contains(r.stderr, "target 3, 3 running") {
		t.Errorf("scale progress (stderr with --output json) lacks the plan or the final state:\n%s", r.stderr)
	}

	// Shrinking deletes the newest servers.
	r = runCmd(t, runScale, env, append([]string{"workers", "1", "-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("scale workers 1 = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res = decodeJSON[scaleResult](t, r)
	wantDeleted := []string{servers[2].Name, servers[1].Name}
	if diff := cmp.Diff(wantDeleted, res.Deleted); diff != "" {
		t.Errorf("scale workers 1 deleted (-want +got):\n%s", diff)
	}
	if res.From != 3 || res.Target != 1 || res.Running != 1 || res.Deleting != 0 {
		t.Errorf("scale workers 1: %+v; want from 3 to target 1, 1 running, none deleting", res)
	}
	left := serversOf(t, p, "workers")
	if len(left) != 1 || left[0].ID != servers[0].ID {
		t.Errorf("after scale workers 1 the project has %v, want only %s", left, servers[0].Name)
	}

	// The same size again changes nothing; flags may come first.
	r = runCmd(t, runScale, env, append(slices.Clone(exampleNodes), "workers", "1")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "workers: target size is 1 already") {
		t.Errorf("scale workers 1 again = %d, stdout %q; want %d and no change", r.code, r.stdout, exitOK)
	}
}

// simpleConfigEnv is the example project with a one-pool config without
// a subnet, whose servers start with their create request.
func simpleConfigEnv(t *testing.T, p *fakeProject) config.Env {
	doc := `{"clusterName": "prod", "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`
	return p.env(t, map[string]string{
		config.EnvClusterConfigFile: "",
		config.EnvClusterConfig:     base64.StdEncoding.EncodeToString([]byte(doc)),
	})
}

func TestScaleNoWait(t *testing.T) {
	t.Parallel()
	// Servers take an hour to create: only --no-wait returns.
	p := newFakeProject(t, hcloudtest.WithActionDuration("create_server", time.Hour))
	r := runCmd(t, runScale, simpleConfigEnv(t, p), "workers", "2", "--no-wait", "--nodes=0:5:cpx31:fsn1:workers", "--output=json")
	if r.code != exitOK {
		t.Fatalf("scale --no-wait = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res := decodeJSON[scaleResult](t, r)
	if res.Waited || res.Created != 2 || res.Target != 2 {
		t.Errorf("scale --no-wait: %+v; want 2 created, target 2, not waited", res)
	}
	servers := serversOf(t, p, "workers")
	if len(servers) != 2 {
		t.Fatalf("after scale --no-wait the project has %d workers, want 2 (requests accepted)", len(servers))
	}
	for _, s := range servers {
		if s.Status != hcloud.ServerStatusInitializing {
			t.Errorf("server %s is %s, want initializing", s.Name, s.Status)
		}
	}
}

func TestScaleFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		opts       []hcloudtest.Option
		setup      func(p *fakeProject)
		args       []string
		wantStderr string
		wantStatus int
	}{
		{
			name:       "sold out",
			setup:      func(p *fakeProject) { p.api.SetUnavailable("cpx31", "fsn1", true) },
			args:       []string{"workers", "2"},
			wantStderr: "pool workers: 2 creates failed:\n  workers-",
		},
		{
			name:       "timeout",
			opts:       []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Hour)},
			args:       []string{"workers", "1", "--timeout=300ms"},
			wantStderr: "pool workers: timed out after",
			// The create request went through; the server stays and is
			// adopted by whoever manages the pool next.
			wantStatus: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newFakeProject(t, c.opts...)
			if c.setup != nil {
				c.setup(p)
			}
			r := runCmd(t, runScale, simpleConfigEnv(t, p), append(c.args, "--nodes=0:5:cpx31:fsn1:workers")...)
			if r.code != exitFailure || !strings.Contains(r.stderr, c.wantStderr) {
				t.Errorf("scale %q = %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, exitFailure, c.wantStderr)
			}
			if n := len(serversOf(t, p, "workers")); n != c.wantStatus {
				t.Errorf("after scale %q the project has %d workers, want %d", c.args, n, c.wantStatus)
			}
		})
	}
}

func TestScaleUsage(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	env := p.env(t, nil)
	for _, c := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, exitOK, "Usage: hcloudscale scale POOL N", ""},
		{"no arguments", exampleNodes, exitUsage, "", "want POOL and N, got 0 arguments"},
		{"three arguments", append([]string{"workers", "1", "2"}, exampleNodes...), exitUsage, "", "want POOL and N, got 3 arguments"},
		{"N not a number", append([]string{"workers", "three"}, exampleNodes...), exitUsage, "", `N "three": want a non-negative integer`},
		{"N negative", append(slices.Clone(exampleNodes), "workers", "--", "-1"), exitUsage, "", `N "-1": want a non-negative integer`},
		{"N negative without --", append([]string{"workers", "-1"}, exampleNodes...), exitUsage, "", "flag provided but not defined: -1"},
		{"unknown pool", append([]string{"wrokers", "1"}, exampleNodes...), exitUsage, "", `pool "wrokers" is not configured; the pools are workers, arm-batch, arm-batch-hel1`},
		{"above max", append([]string{"workers", "11"}, exampleNodes...), exitUsage, "", "pool workers: size 11 is outside its min size 0 and max size 10"},
		{"bad timeout", append([]string{"workers", "1", "--timeout=0s"}, exampleNodes...), exitUsage, "", "--timeout 0s: want a positive duration"},
		{"bad config", []string{"workers", "1"}, exitFailure, "", "--nodes: no pools"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, runScale, env, c.args...)
			if r.code != c.wantCode || !strings.Contains(r.stdout, c.wantStdout) || !strings.Contains(r.stderr, c.wantStderr) {
				t.Errorf("scale %q = %d, stdout %q, stderr %q; want %d, stdout containing %q, stderr containing %q",
					c.args, r.code, r.stdout, r.stderr, c.wantCode, c.wantStdout, c.wantStderr)
			}
		})
	}
	if n := len(serversOf(t, p, "workers")); n != 0 {
		t.Errorf("bad usage created %d servers", n)
	}
}

// TestScaleToZeroOfAnUnnamedCluster checks that scaling to 0 without a
// cluster name, whose scope cannot exclude another unnamed cluster's pool
// of the same name, is refused unless --every-unnamed-cluster is given,
// and that the flag widens nothing else.
func TestScaleToZeroOfAnUnnamedCluster(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	for _, name := range []string{"workers-a", "workers-b"} {
		if _, err := p.api.AddServer(hcloudtest.ServerInfo{Name: name, ServerType: "cpx31", Location: "fsn1",
			Status: hcloud.ServerStatusRunning, Labels: map[string]string{config.LabelNodeGroup: "workers"}}); err != nil {
			t.Fatal(err)
		}
	}
	doc := `{"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`
	env := p.env(t, map[string]string{
		config.EnvClusterConfigFile: "",
		config.EnvClusterConfig:     base64.StdEncoding.EncodeToString([]byte(doc)),
	})
	r := runCmd(t, runScale, env, "workers", "0", "--nodes=0:5:cpx31:fsn1:workers")
	if r.code != exitUsage || !strings.Contains(r.stderr, "another unnamed cluster") || !strings.Contains(r.stderr, "--every-unnamed-cluster") {
		t.Errorf("scale workers 0 without a cluster name = %d, stderr %q; want %d naming the risk and the flag", r.code, r.stderr, exitUsage)
	}
	if n := len(serversOf(t, p, "workers")); n != 2 {
		t.Fatalf("after the refused scale the project has %d workers; want 2", n)
	}
	r = runCmd(t, runScale, env, "workers", "1", "--every-unnamed-cluster", "--nodes=0:5:cpx31:fsn1:workers")
	if r.code != exitUsage || !strings.Contains(r.stderr, "only goes with N 0") {
		t.Errorf("scale workers 1 --every-unnamed-cluster = %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
	r = runCmd(t, runScale, env, "workers", "0", "--every-unnamed-cluster", "--nodes=0:5:cpx31:fsn1:workers")
	if r.code != exitOK {
		t.Fatalf("scale workers 0 --every-unnamed-cluster = %d; stderr:\n%s", r.code, r.stderr)
	}
	if n := len(serversOf(t, p, "workers")); n != 0 {
		t.Errorf("after scale to 0 the project has %d workers; want 0", n)
	}
}

// A failed creation is in state Creating and has an error: progress counts
// it once, as failed.
func TestStatusLineCountsFailedCreationsOnce(t *testing.T) {
	failed := pool.Instance{Name: "workers-1", State: pool.Creating, Error: &pool.ErrorInfo{Class: pool.Other, Code: pool.CodeNotStarted}}
	st := pool.Status{Target: 2, Creating: 2, Failed: 1, Errors: []pool.Instance{failed}}
	if got, want := statusLine(st), "target 2, 1 creating, 1 failed"; got != want {
		t.Errorf("statusLine(%+v) = %q; want %q", st, got, want)
	}
}

// scale -o json reports the servers that exist: none when every create
// failed.
func TestScaleJSONCountsServersThatExist(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	p.api.SetUnavailable("cpx31", "fsn1", true)
	r := runCmd(t, runScale, simpleConfigEnv(t, p), "workers", "2", "-o", "json", "--nodes=0:5:cpx31:fsn1:workers")
	res := decodeJSON[scaleResult](t, r)
	if r.code != exitFailure || res.Requested != 2 || res.Created != 0 || len(res.CreatedServers) != 0 || len(res.Errors) != 2 {
		t.Errorf("scale with every create failing = %d, %+v; want %d, 2 requested, 0 created, 2 errors", r.code, res, exitFailure)
	}
}

// interruptWhen runs scale with a context that ends (as on Ctrl-C) once
// ready says so.
func interruptWhen(t *testing.T, env config.Env, ready func() bool, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for !ready() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
	}()
	var stdout, stderr bytes.Buffer
	code := runScale(ctx, args, &stdout, &stderr, env)
	return ran{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// Ctrl-C during a scale-up says which servers are still being created and
// what the next command does with them, instead of "context canceled".
func TestScaleInterrupted(t *testing.T) {
	t.Parallel()
	t.Run("plain pool", func(t *testing.T) {
		t.Parallel()
		p := newFakeProject(t, hcloudtest.WithActionDuration("create_server", time.Hour))
		r := interruptWhen(t, simpleConfigEnv(t, p), func() bool { return len(serversOf(t, p, "workers")) == 2 },
			"workers", "2", "-o", "json", "--nodes=0:5:cpx31:fsn1:workers")
		res := decodeJSON[scaleResult](t, r)
		servers := serversOf(t, p, "workers")
		if r.code != exitFailure || res.Created != 2 || len(servers) != 2 {
			t.Fatalf("interrupted scale = %d, created %d, %d servers; want %d, 2, 2; stderr:\n%s", r.code, res.Created, len(servers), exitFailure, r.stderr)
		}
		for _, want := range []string{"pool workers: interrupted before the pool reached 2 servers", "2 servers still being created at Hetzner: ",
			servers[0].Name, servers[1].Name, `Hetzner finishes them; they carry the pool's labels, so the next "hcloudscale scale workers" or the autoscaler counts them`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("interrupted scale: stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "context canceled") {
			t.Errorf("interrupted scale: stderr says only %q:\n%s", "context canceled", r.stderr)
		}
	})
	t.Run("subnet pool", func(t *testing.T) {
		t.Parallel()
		// The servers are created stopped; attaching them takes an hour.
		p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0), hcloudtest.WithActionDuration("attach_to_network", time.Hour))
		r := interruptWhen(t, p.env(t, nil), func() bool { return len(serversOf(t, p, "workers")) == 1 },
			append([]string{"workers", "1"}, exampleNodes...)...)
		for _, want := range []string{"1 server still being created at Hetzner: workers-",
			`these stay off and unattached (and are paid for) until a command that manages the pool finishes them: run "hcloudscale scale workers 1" again (or serve) to finish them (one whose action history shows`,
			`or "hcloudscale cleanup --yes" to delete the pool's servers`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("interrupted scale of a subnet pool: stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
}

// scale -o json lists as deleted only the servers that are gone: a server
// whose delete action failed is still there.
func TestScaleJSONDeletedAreGone(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	env := simpleConfigEnv(t, p)
	if r := runCmd(t, runScale, env, "workers", "2", "--nodes=0:5:cpx31:fsn1:workers"); r.code != exitOK {
		t.Fatalf("scale workers 2 = %d; stderr:\n%s", r.code, r.stderr)
	}
	p.api.FailAction("delete_server", "server_error", "disk busy")
	r := runCmd(t, runScale, env, "workers", "0", "-o", "json", "--timeout=2s", "--nodes=0:5:cpx31:fsn1:workers")
	res := decodeJSON[scaleResult](t, r)
	left := serversOf(t, p, "workers")
	if r.code != exitFailure || len(left) != 1 {
		t.Fatalf("scale workers 0 with a failed delete = %d, %d left; want %d, 1 left; stderr:\n%s", r.code, len(left), exitFailure, r.stderr)
	}
	if len(res.Deleted) != 1 || slices.Contains(res.Deleted, left[0].Name) || !slices.Equal(res.NotDeleted, []string{left[0].Name}) {
		t.Errorf("scale workers 0: deleted %v, notDeleted %v; want the gone server deleted and %s not; stderr:\n%s", res.Deleted, res.NotDeleted, left[0].Name, r.stderr)
	}
}

// TestScaleResumesOnlyItsPool: a create flow of another pool is left
// unfinished (created stopped, not attached: an autoscaler may be finishing
// it). Scaling workers finishes the workers pool's own unfinished flow and
// leaves the other pool's server as it is.
func TestScaleResumesOnlyItsPool(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	client := p.api.Client()
	leftover := func(pool, serverType, location string) int64 {
		t.Helper()
		res, _, err := client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
			Name: pool + "-0123456789abcdef", ServerType: &hcloud.ServerType{Name: serverType},
			Image: &hcloud.Image{Name: "ubuntu-24.04"}, Location: &hcloud.Location{Name: location},
			Labels:           map[string]string{config.LabelNodeGroup: pool, config.LabelCluster: "prod"},
			StartAfterCreate: hcloud.Ptr(false),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Server.ID
	}
	other := leftover("arm-batch", "cax21", "nbg1")
	own := leftover("workers", "cpx31", "fsn1")

	r := runCmd(t, runScale, p.env(t, nil), append([]string{"workers", "1"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("scale workers 1 = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	if s, ok := p.api.ServerByID(own); !ok || s.Status != hcloud.ServerStatusRunning || len(s.Networks) != 1 {
		t.Errorf("the workers pool's unfinished server = %+v, %v; want it attached and running", s, ok)
	}
	if s, ok := p.api.ServerByID(other); !ok || s.Status != hcloud.ServerStatusOff || len(s.Networks) != 0 {
		t.Errorf("the arm-batch pool's unfinished server = %+v, %v; want it left off and not attached", s, ok)
	}
	if got := p.api.Count("POST /servers"); got != 2 {
		t.Errorf("POST /servers = %d; want only the two leftovers' creates", got)
	}
}
