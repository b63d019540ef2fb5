package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// addServers puts servers into the project as another tool (or an earlier
// autoscaler) left them, and returns their IDs by name.
func addServers(t *testing.T, p *fakeProject, servers ...hcloudtest.ServerInfo) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	for _, s := range servers {
		id, err := p.api.AddServer(s)
		if err != nil {
			t.Fatalf("AddServer(%s): %v", s.Name, err)
		}
		ids[s.Name] = id
	}
	return ids
}

// poolLabels are the server labels of a pool of the example's cluster.
func poolLabels(pool, cluster string) map[string]string {
	l := map[string]string{config.LabelNodeGroup: pool}
	if cluster != "" {
		l[config.LabelCluster] = cluster
	}
	return l
}

func TestStatus(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	hourAgo := time.Now().Add(-time.Hour)
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "workers-1", ServerType: "cpx31", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "workers-2", ServerType: "cpx31", Labels: poolLabels("workers", "prod")},
		// Left behind mid-create by a restart: never ran.
		hcloudtest.ServerInfo{Name: "workers-3", ServerType: "cpx31", Status: hcloud.ServerStatusInitializing, Created: hourAgo, Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "workers-4", ServerType: "cpx31", Status: hcloud.ServerStatusUnknown, Labels: poolLabels("workers", "prod")},
		// Created stopped and never attached to the subnet pool's
		// network (an interrupted scale): not running.
		hcloudtest.ServerInfo{Name: "workers-5", ServerType: "cpx31", Status: hcloud.ServerStatusOff, Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "arm-1", ServerType: "cax21", Location: "nbg1", Labels: poolLabels("arm-batch", "prod")},
		// Not this cluster's.
		hcloudtest.ServerInfo{Name: "staging-workers-1", ServerType: "cpx31", Labels: poolLabels("workers", "staging")},
		hcloudtest.ServerInfo{Name: "bastion"},
	)

	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res := decodeJSON[statusResult](t, r)
	want := []poolStatus{
		{Name: "workers", Pool: "workers", Available: true, ServerType: "cpx31", Location: "fsn1", MinSize: 0, MaxSize: 10, Target: 5,
			Running: 3, Creating: 1, Failed: 1, Offering: "available"},
		{Name: "arm-batch", Pool: "arm-batch", Available: true, ServerType: "cax21", Location: "nbg1", MinSize: 0, MaxSize: 5, Target: 1,
			Running: 1, Offering: "available"},
		{Name: "arm-batch-hel1", Pool: "arm-batch-hel1", Available: true, ServerType: "cax21", Location: "hel1", MinSize: 0, MaxSize: 5, Offering: "available"},
		{Name: "arm-batch-hel1@cax31-hel1", Pool: "arm-batch-hel1", Available: true, ServerType: "cax31", Location: "hel1", MinSize: 0, MaxSize: 5, Offering: "available"},
		{Name: "arm-batch-hel1@cax21-fsn1", Pool: "arm-batch-hel1", Available: true, ServerType: "cax21", Location: "fsn1", MinSize: 0, MaxSize: 5, Offering: "available"},
	}
	// Drift has a test of its own: servers added by hand differ in much.
	if diff := cmp.Diff(want, res.Pools, cmpopts.IgnoreFields(poolStatus{}, "Instances", "Unavailable", "Drifted")); diff != "" {
		t.Errorf("status pools (-want +got):\n%s", diff)
	}
	if res.ClusterName != "prod" {
		t.Errorf("status clusterName = %q, want prod", res.ClusterName)
	}

	type inst struct{ Name, State, Status, Error string }
	var got []inst
	for _, in := range res.Pools[0].Instances {
		i := inst{Name: in.Name, State: in.State, Status: in.Status}
		if in.Error != nil {
			i.Error = in.Error.Class + "/" + in.Error.Code
		}
		got = append(got, i)
	}
	wantInst := []inst{
		{"workers-1", "running", "running", ""},
		{"workers-2", "running", "running", ""},
		{"workers-3", "creating", "initializing", "Other/not-started"},
		// Not a failed creation: running, with a code but no class
		// (the autoscaler gets no error info for it).
		{"workers-4", "running", "unknown", "/unknown-status"},
		{"workers-5", "creating", "off", "/unfinished-create"},
	}
	if diff := cmp.Diff(wantInst, got); diff != "" {
		t.Errorf("status workers instances (-want +got):\n%s", diff)
	}
	if rl := res.RateLimit; rl.Limit != hcloudtest.DefaultRateLimit || rl.Remaining <= 0 || rl.Remaining >= rl.Limit || rl.Reset == nil {
		t.Errorf("status rateLimit = %+v; want limit %d, some of it spent, and a reset time", rl, hcloudtest.DefaultRateLimit)
	}

	// The table shows the same.
	r = runCmd(t, runStatus, p.env(t, nil), exampleNodes...)
	for _, want := range []string{
		"Cluster prod\n",
		"Instances with errors\n",
		"workers-3",
		"Other not-started: ",
		"workers-4",
		"unknown-status: Hetzner reports the server's status as unknown",
		`unfinished-create: created stopped and not attached to network k8s: an interrupted create; "hcloudscale scale workers <N>" or serve finishes it`,
		"API budget: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status table lacks %q; output:\n%s", want, r.stdout)
		}
	}
	// The drift section lists servers of their own (TestStatusShowsDrift).
	if before, _, _ := strings.Cut(r.stdout, "Servers that differ"); strings.Contains(before, "workers-1") {
		t.Errorf("status table lists a healthy instance without --instances:\n%s", r.stdout)
	}
	r = runCmd(t, runStatus, p.env(t, nil), append([]string{"--instances"}, exampleNodes...)...)
	if !strings.Contains(r.stdout, "workers-1") || strings.Contains(r.stdout, "staging-workers-1") || strings.Contains(r.stdout, "bastion") {
		t.Errorf("status --instances lists the wrong servers:\n%s", r.stdout)
	}
}

func TestStatusFailures(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	for _, c := range []struct {
		name       string
		extra      map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"bad config", map[string]string{config.EnvPublicIPv6: "perhaps"}, exampleNodes, exitFailure, `HCLOUD_PUBLIC_IPV6: "perhaps" is not a boolean`},
		{"missing firewall", map[string]string{config.EnvFirewall: "gone"}, exampleNodes, exitFailure, `HCLOUD_FIREWALL[0]: firewall "gone" does not exist`},
		{"bad output", nil, append([]string{"--output=yaml"}, exampleNodes...), exitUsage, `--output "yaml"`},
		{"argument", nil, append([]string{"workers"}, exampleNodes...), exitUsage, `unexpected arguments ["workers"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, runStatus, p.env(t, c.extra), c.args...)
			if r.code != c.wantCode || !strings.Contains(r.stderr, c.wantStderr) {
				t.Errorf("status = %d, stderr %q; want %d and %q", r.code, r.stderr, c.wantCode, c.wantStderr)
			}
		})
	}
}

// TestStatusWithSoldOutType: status still reports a cluster whose pool's
// server type cannot be ordered in its location; the offering says so and
// the problem is a warning.
func TestStatusWithSoldOutType(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	if err := p.api.SetServerTypeAvailable("cax21", "hel1", false); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res := decodeJSON[statusResult](t, r)
	offerings := map[string]string{}
	for _, ps := range res.Pools {
		offerings[ps.Name] = ps.Offering
		// The pool starts with its offering marked unavailable, as the
		// autoscaler's does (the pools share the registry).
		if ps.Name == "arm-batch-hel1" && (len(ps.Unavailable) != 1 || ps.Unavailable[0].ServerType != "cax21" || ps.Unavailable[0].Location != "hel1") {
			t.Errorf("pool %s: unavailable offerings %+v; want cax21 in hel1", ps.Name, ps.Unavailable)
		}
	}
	if got := offerings["arm-batch-hel1"]; got != "unavailable" {
		t.Errorf("arm-batch-hel1 offering = %q, want unavailable", got)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), `server type "cax21" is not available in location "hel1"`) {
		t.Errorf("warnings = %q, want one about cax21 in hel1", res.Warnings)
	}
}

// TestStatusShowsDrift: a server built otherwise than its pool's
// configuration says is marked with what differs; one that matches is not.
func TestStatusShowsDrift(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	ids := addServers(t, p,
		hcloudtest.ServerInfo{Name: "arm-batch-1", ServerType: "cax11", Location: "nbg1", Labels: poolLabels("arm-batch", "prod")},
	)
	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d; stderr:\n%s", r.code, r.stderr)
	}
	res := decodeJSON[statusResult](t, r)
	var drift []string
	for _, in := range res.Pools[1].Instances {
		if in.ServerID == ids["arm-batch-1"] {
			drift = in.Drift
		}
	}
	if res.Pools[1].Drifted != 1 || len(drift) == 0 || !strings.HasPrefix(drift[0], "server_type: server type cax11, the pool's is cax21") {
		t.Errorf("arm-batch: drifted %d, drift %q; want the server marked, server type first", res.Pools[1].Drifted, drift)
	}
	r = runCmd(t, runStatus, p.env(t, nil), exampleNodes...)
	if !strings.Contains(r.stdout, "Servers that differ from their pool's configuration") || !strings.Contains(r.stdout, "server_type: server type cax11") {
		t.Errorf("status table lacks the drifted server:\n%s", r.stdout)
	}
}

// A pool dropped from the configuration keeps its servers until the
// autoscaler removes them: status lists it as removed.
func TestStatusListsRemovedPools(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "workers-1", ServerType: "cpx31", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "gpu-1", ServerType: "ccx13", Location: "hel1", Labels: poolLabels("gpu", "prod")},
		hcloudtest.ServerInfo{Name: "gpu-2", ServerType: "ccx13", Location: "hel1", Labels: poolLabels("gpu", "prod")},
	)
	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	res := decodeJSON[statusResult](t, r)
	var gpu *poolStatus
	for i := range res.Pools {
		if res.Pools[i].Name == "gpu" {
			gpu = &res.Pools[i]
		}
	}
	if gpu == nil || !gpu.Removed || gpu.Target != 2 || gpu.MaxSize != 0 || gpu.ServerType != "ccx13" || gpu.Location != "hel1" {
		t.Fatalf("status of the removed pool gpu = %+v; want removed, target 2, max 0, ccx13 in hel1", gpu)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, `pool "gpu" is not in the configuration`) }) {
		t.Errorf("status warnings do not name the removed pool: %q", res.Warnings)
	}
	r = runCmd(t, runStatus, p.env(t, nil), exampleNodes...)
	if !strings.Contains(r.stdout, "gpu (removed)") {
		t.Errorf("status table does not mark the removed pool:\n%s", r.stdout)
	}
}

// TestStatusShowsSpreadGroups: the groups of a pool with spreadGroups,
// found by their labels, with their fill; a group of another cluster is
// not the pool's.
func TestStatusShowsSpreadGroups(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	own, err := p.api.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "arm-batch-spread-1", Labels: map[string]string{
		config.LabelSpreadPool: "arm-batch", config.LabelCluster: "prod",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.api.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "staging-spread", Labels: map[string]string{
		config.LabelSpreadPool: "arm-batch", config.LabelCluster: "staging",
	}}); err != nil {
		t.Fatal(err)
	}
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "arm-1", ServerType: "cax21", Location: "nbg1", PlacementGroup: own, Labels: poolLabels("arm-batch", "prod")},
		hcloudtest.ServerInfo{Name: "arm-2", ServerType: "cax21", Location: "nbg1", PlacementGroup: own, Labels: poolLabels("arm-batch", "prod")},
	)
	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	got := map[string][]spreadGroupStatus{}
	for _, ps := range decodeJSON[statusResult](t, r).Pools {
		got[ps.Name] = ps.SpreadGroups
	}
	want := map[string][]spreadGroupStatus{"arm-batch": {{ID: own, Name: "arm-batch-spread-1", Servers: 2}}, "workers": nil, "arm-batch-hel1": nil,
		"arm-batch-hel1@cax31-hel1": nil, "arm-batch-hel1@cax21-fsn1": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spread groups (-want +got):\n%s", diff)
	}
	text := runCmd(t, runStatus, p.env(t, nil), exampleNodes...)
	if !strings.Contains(text.stdout, "Spread placement groups\n  arm-batch: arm-batch-spread-1 2/10\n") {
		t.Errorf("status output lacks the spread groups:\n%s", text.stdout)
	}
}

// TestStatusShowsOfferings: each offering of a pool is a row of its own,
// with the pool it belongs to, the servers running on it and whether it
// can be scaled up now.
func TestStatusShowsOfferings(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	if err := p.api.SetServerTypeAvailable("cax21", "hel1", false); err != nil {
		t.Fatal(err)
	}
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "hel-1", ServerType: "cax31", Location: "hel1", Labels: poolLabels("arm-batch-hel1", "prod")},
		hcloudtest.ServerInfo{Name: "hel-2", ServerType: "cax21", Location: "fsn1", Labels: poolLabels("arm-batch-hel1", "prod")},
		hcloudtest.ServerInfo{Name: "hel-3", ServerType: "cax21", Location: "fsn1", Labels: poolLabels("arm-batch-hel1", "prod")},
	)
	r := runCmd(t, runStatus, p.env(t, nil), append([]string{"-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("status = %d, want %d; stderr:\n%s", r.code, exitOK, r.stderr)
	}
	type row struct {
		Pool, Type, Location string
		Available            bool
		Servers              []string
	}
	got := map[string]row{}
	for _, ps := range decodeJSON[statusResult](t, r).Pools {
		rw := row{Pool: ps.Pool, Type: ps.ServerType, Location: ps.Location, Available: ps.Available}
		for _, in := range ps.Instances {
			rw.Servers = append(rw.Servers, in.Name)
		}
		got[ps.Name] = rw
	}
	want := map[string]row{
		"workers":                   {Pool: "workers", Type: "cpx31", Location: "fsn1", Available: true},
		"arm-batch":                 {Pool: "arm-batch", Type: "cax21", Location: "nbg1", Available: true},
		"arm-batch-hel1":            {Pool: "arm-batch-hel1", Type: "cax21", Location: "hel1"},
		"arm-batch-hel1@cax31-hel1": {Pool: "arm-batch-hel1", Type: "cax31", Location: "hel1", Available: true, Servers: []string{"hel-1"}},
		"arm-batch-hel1@cax21-fsn1": {Pool: "arm-batch-hel1", Type: "cax21", Location: "fsn1", Available: true, Servers: []string{"hel-2", "hel-3"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offerings (-want +got):\n%s", diff)
	}
}
