package main

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// projectNames lists every server left in the project, sorted.
func projectNames(t *testing.T, p *fakeProject) []string {
	t.Helper()
	servers, err := p.api.Servers("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// cleanupProject is a project shared by this cluster ("prod"), another
// cluster ("staging"), a cluster without a name, and servers that no
// autoscaler made.
func cleanupProject(t *testing.T) *fakeProject {
	t.Helper()
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	addServers(t, p,
		hcloudtest.ServerInfo{Name: "prod-workers-1", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "prod-workers-2", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "prod-arm-1", ServerType: "cax21", Location: "nbg1", Labels: poolLabels("arm-batch", "prod")},
		hcloudtest.ServerInfo{Name: "prod-retired-1", Labels: poolLabels("retired", "prod")},
		hcloudtest.ServerInfo{Name: "staging-workers-1", Labels: poolLabels("workers", "staging")},
		hcloudtest.ServerInfo{Name: "unnamed-workers-1", Labels: poolLabels("workers", "")},
		hcloudtest.ServerInfo{Name: "control-plane-1", Labels: map[string]string{"role": "control-plane"}},
		hcloudtest.ServerInfo{Name: "bastion"},
	)
	return p
}

func TestCleanup(t *testing.T) {
	t.Parallel()
	all := []string{"bastion", "control-plane-1", "prod-arm-1", "prod-retired-1", "prod-workers-1", "prod-workers-2", "staging-workers-1", "unnamed-workers-1"}
	without := func(names ...string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(names, n) })
	}
	unnamedCluster := map[string]string{
		config.EnvClusterConfigFile: "",
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(
			`{"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`)),
	}

	for _, c := range []struct {
		name         string
		extra        map[string]string
		args         []string
		wantSelector string
		wantListed   []string
		wantLeft     []string
	}{
		{
			name:         "dry run by default",
			args:         exampleNodes,
			wantSelector: "hcloud/node-group in (workers,arm-batch,arm-batch-hel1),hcloudscale/cluster=prod",
			wantListed:   []string{"prod-arm-1", "prod-workers-1", "prod-workers-2"},
			wantLeft:     all,
		},
		{
			name:         "yes deletes this cluster's servers of the configured pools",
			args:         append([]string{"--yes"}, exampleNodes...),
			wantSelector: "hcloud/node-group in (workers,arm-batch,arm-batch-hel1),hcloudscale/cluster=prod",
			wantListed:   []string{"prod-arm-1", "prod-workers-1", "prod-workers-2"},
			wantLeft:     without("prod-workers-1", "prod-workers-2", "prod-arm-1"),
		},
		{
			name:         "all pools includes retired pools of this cluster",
			args:         append([]string{"--yes", "--all-pools"}, exampleNodes...),
			wantSelector: "hcloud/node-group,hcloudscale/cluster=prod",
			wantListed:   []string{"prod-arm-1", "prod-retired-1", "prod-workers-1", "prod-workers-2"},
			wantLeft:     without("prod-workers-1", "prod-workers-2", "prod-arm-1", "prod-retired-1"),
		},
		{
			name:         "a cluster without a name leaves named clusters alone",
			extra:        unnamedCluster,
			args:         []string{"--yes", "--nodes=0:5:cpx31:fsn1:workers"},
			wantSelector: "hcloud/node-group in (workers),!hcloudscale/cluster",
			wantListed:   []string{"unnamed-workers-1"},
			wantLeft:     without("unnamed-workers-1"),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := cleanupProject(t)
			r := runCmd(t, runCleanup, p.env(t, c.extra), append([]string{"--output=json"}, c.args...)...)
			if r.code != exitOK {
				t.Fatalf("cleanup %q = %d, want %d; stderr:\n%s", c.args, r.code, exitOK, r.stderr)
			}
			res := decodeJSON[cleanupResult](t, r)
			if res.Selector != c.wantSelector {
				t.Errorf("cleanup selector = %q, want %q", res.Selector, c.wantSelector)
			}
			var listed []string
			for _, s := range res.Servers {
				listed = append(listed, s.Name)
			}
			if diff := cmp.Diff(c.wantListed, listed); diff != "" {
				t.Errorf("cleanup listed (-want +got):\n%s", diff)
			}
			wantDeleted := []string{}
			if !res.DryRun {
				wantDeleted = slices.Sorted(slices.Values(c.wantListed))
			}
			if diff := cmp.Diff(wantDeleted, res.Deleted); diff != "" {
				t.Errorf("cleanup deleted (-want +got):\n%s", diff)
			}
			// Deletes were awaited: the servers are gone when cleanup
			// returns, not merely deleting.
			if diff := cmp.Diff(c.wantLeft, projectNames(t, p)); diff != "" {
				t.Errorf("servers left in the project (-want +got):\n%s", diff)
			}
		})
	}
}

// Without a cluster name, --all-pools reaches the servers of every
// unnamed cluster in the project: cleanup refuses it unless told that this
// is meant, and then deletes exactly what it printed, grouped by pool,
// never a named cluster's server.
func TestCleanupAllPoolsOfAnUnnamedCluster(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	addServers(t, p,
		// This cluster, "dev", unnamed.
		hcloudtest.ServerInfo{Name: "workers-1", Labels: poolLabels("workers", "")},
		// Two other unnamed clusters.
		hcloudtest.ServerInfo{Name: "prod-workers-1", Labels: poolLabels("prod-workers", "")},
		hcloudtest.ServerInfo{Name: "prod-workers-2", Labels: poolLabels("prod-workers", "")},
		hcloudtest.ServerInfo{Name: "ci-1", Labels: poolLabels("ci", "")},
		// A named cluster with the same pool name.
		hcloudtest.ServerInfo{Name: "staging-workers-1", Labels: poolLabels("workers", "staging")},
		hcloudtest.ServerInfo{Name: "control-plane-1", Labels: map[string]string{"role": "control-plane"}},
	)
	env := p.env(t, map[string]string{
		config.EnvClusterConfigFile: "",
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(
			`{"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`)),
	})
	all := []string{"ci-1", "control-plane-1", "prod-workers-1", "prod-workers-2", "staging-workers-1", "workers-1"}

	r := runCmd(t, runCleanup, env, "--yes", "--all-pools", "--nodes=0:5:cpx31:fsn1:workers")
	if r.code != exitUsage || !strings.Contains(r.stderr, "every autoscaled server of every unnamed cluster in the project") ||
		!strings.Contains(r.stderr, "--every-unnamed-cluster") {
		t.Errorf("cleanup --yes --all-pools without a cluster name = %d, stderr %q; want %d and a message naming the risk and the flag",
			r.code, r.stderr, exitUsage)
	}
	if diff := cmp.Diff(all, projectNames(t, p)); diff != "" {
		t.Fatalf("servers after the refused cleanup (-want +got):\n%s", diff)
	}

	// The dry run prints the scope, grouped by pool.
	r = runCmd(t, runCleanup, env, "--all-pools", "--every-unnamed-cluster", "--nodes=0:5:cpx31:fsn1:workers")
	printed := r.stdout
	for _, want := range []string{
		"Pool ci: 1 server\n  NAME", "Pool prod-workers: 2 servers\n", "Pool workers: 1 server\n",
		"Dry run: nothing was deleted. Run again with --yes to delete 4 servers.",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("cleanup dry run lacks %q; output:\n%s", want, printed)
		}
	}
	if strings.Contains(printed, "staging-workers-1") {
		t.Errorf("the dry run lists a named cluster's server:\n%s", printed)
	}

	r = runCmd(t, runCleanup, env, "--output=json", "--yes", "--all-pools", "--every-unnamed-cluster", "--nodes=0:5:cpx31:fsn1:workers")
	if r.code != exitOK {
		t.Fatalf("cleanup --yes --all-pools --every-unnamed-cluster = %d; stderr:\n%s", r.code, r.stderr)
	}
	res := decodeJSON[cleanupResult](t, r)
	for _, name := range res.Deleted {
		if !strings.Contains(printed, "  "+name+" ") {
			t.Errorf("deleted %s, which the dry run did not print", name)
		}
	}
	if diff := cmp.Diff([]string{"control-plane-1", "staging-workers-1"}, projectNames(t, p)); diff != "" {
		t.Errorf("servers left (-want +got):\n%s", diff)
	}
}

func TestCleanupTable(t *testing.T) {
	t.Parallel()
	p := cleanupProject(t)
	r := runCmd(t, runCleanup, p.env(t, nil), exampleNodes...)
	for _, want := range []string{
		`Servers with label selector "hcloud/node-group in (workers,arm-batch,arm-batch-hel1),hcloudscale/cluster=prod": 3`,
		"prod-arm-1", "cax21", "nbg1",
		"Dry run: nothing was deleted. Run again with --yes to delete 3 servers.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cleanup dry run output lacks %q; output:\n%s", want, r.stdout)
		}
	}
	r = runCmd(t, runCleanup, p.env(t, nil), append([]string{"--yes"}, exampleNodes...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "Deleting 3 servers...") || !strings.Contains(r.stdout, "Deleted 3 servers in ") {
		t.Errorf("cleanup --yes = %d, output:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Nothing left to do is success.
	r = runCmd(t, runCleanup, p.env(t, nil), append([]string{"--yes"}, exampleNodes...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "prod\": 0\n") {
		t.Errorf("cleanup --yes again = %d, output:\n%s", r.code, r.stdout)
	}
}

func TestCleanupFailures(t *testing.T) {
	t.Parallel()
	p := cleanupProject(t)
	// The references are gone (terraform destroy): cleanup still works.
	gone := map[string]string{config.EnvFirewall: "destroyed", config.EnvNetwork: "destroyed-too"}
	r := runCmd(t, runCleanup, p.env(t, gone), exampleNodes...)
	if r.code != exitOK || !strings.Contains(r.stdout, ": 3\n") {
		t.Errorf("cleanup without the network and firewall = %d, output %q, stderr %q; want the 3 servers listed", r.code, r.stdout, r.stderr)
	}

	p.api.FailRequest("DELETE /servers/{id}", 1, hcloudtest.RequestFault{Code: "forbidden", Message: "token is read-only"})
	r = runCmd(t, runCleanup, p.env(t, nil), append([]string{"--yes", "-o", "json"}, exampleNodes...)...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "1 failure") || !strings.Contains(r.stderr, "token is read-only") {
		t.Errorf("cleanup --yes with a refused delete = %d, stderr %q; want %d and the refusal", r.code, r.stderr, exitFailure)
	}
	res := decodeJSON[cleanupResult](t, r)
	if len(res.Deleted) != 2 || len(res.Errors) != 1 {
		t.Errorf("cleanup --yes with a refused delete: deleted %v, errors %v; want 2 deleted and 1 error", res.Deleted, res.Errors)
	}

	if len(res.NotDeleted) != 1 || !strings.Contains(res.NotDeleted[0].Error, "delete refused, the server is still there") {
		t.Errorf("cleanup --yes with a refused delete: notDeleted %+v; want the refused server", res.NotDeleted)
	}

	for _, c := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"argument", append([]string{"now"}, exampleNodes...), exitUsage, `unexpected arguments ["now"`},
		{"bad output", append([]string{"-o", "csv"}, exampleNodes...), exitUsage, `--output "csv"`},
		{"no pools", nil, exitFailure, "--nodes: no pools"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, runCleanup, p.env(t, nil), c.args...)
			if r.code != c.wantCode || !strings.Contains(r.stderr, c.wantStderr) {
				t.Errorf("cleanup %q = %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.wantCode, c.wantStderr)
			}
		})
	}
}

// A delete action that fails leaves the server where it was: cleanup says
// so by the server's name and does not count it as deleted.
func TestCleanupFailedDeleteAction(t *testing.T) {
	t.Parallel()
	p := cleanupProject(t)
	p.api.FailAction("delete_server", "server_error", "disk busy")
	r := runCmd(t, runCleanup, p.env(t, nil), append([]string{"--yes", "-o", "json"}, exampleNodes...)...)
	res := decodeJSON[cleanupResult](t, r)
	var left []string
	for _, n := range []string{"prod-workers-1", "prod-workers-2", "prod-arm-1"} {
		if slices.Contains(projectNames(t, p), n) {
			left = append(left, n)
		}
	}
	if r.code != exitFailure || len(left) != 1 {
		t.Fatalf("cleanup --yes with a failed delete action = %d, servers left %v; want %d and 1 left; stderr:\n%s", r.code, left, exitFailure, r.stderr)
	}
	name := left[0]
	if slices.Contains(res.Deleted, name) || len(res.Deleted) != 2 {
		t.Errorf("deleted = %v; want the 2 servers that are gone, not %s", res.Deleted, name)
	}
	if len(res.NotDeleted) != 1 || res.NotDeleted[0].Name != name || !strings.Contains(res.NotDeleted[0].Error, "delete action failed, the server is still there (status running)") ||
		!strings.Contains(res.NotDeleted[0].Error, "disk busy") {
		t.Errorf("notDeleted = %+v; want %s with the action's error", res.NotDeleted, name)
	}
	if !strings.Contains(r.stderr, name) || !strings.Contains(r.stderr, "disk busy") {
		t.Errorf("stderr %q; want the server's name and the action's error", r.stderr)
	}

	// The table says the same, server by server.
	p.api.FailAction("delete_server", "server_error", "disk busy")
	r = runCmd(t, runCleanup, p.env(t, nil), append([]string{"--yes"}, exampleNodes...)...)
	for _, want := range []string{"  not deleted  " + name, "Deleted 0 of 1 server in "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cleanup --yes table lacks %q; output:\n%s", want, r.stdout)
		}
	}
}

// --log-level debug logs the API traffic, as the flag says, without the
// token.
func TestCleanupDebugLogsAPITraffic(t *testing.T) {
	t.Parallel()
	p := cleanupProject(t)
	r := runCmd(t, runCleanup, p.env(t, nil), append([]string{"--log-level", "debug", "-o", "json"}, exampleNodes...)...)
	if r.code != exitOK || !strings.Contains(r.stderr, "api request") || !strings.Contains(r.stderr, "/servers?") {
		t.Errorf("cleanup --log-level debug = %d, stderr:\n%s\nwant the listing request logged", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, p.api.Token()) {
		t.Errorf("cleanup --log-level debug logged the token:\n%s", r.stderr)
	}
}

// TestCleanupRollsBackTheNodeLifecycle: cleanup --yes with a kubeconfig at
// hand ends what the node lifecycle left before it deletes, as replace
// --abort does: the old node of a replacement in its scope serves again
// (uncordoned, unmarked) should its server's delete fail, the replacement
// holding no pods is deleted, and a node of a pool out of its scope loses
// the lifecycle's mark and cordon while its server stays.
func TestCleanupRollsBackTheNodeLifecycle(t *testing.T) {
	p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
	ids := addServers(t, p,
		hcloudtest.ServerInfo{Name: "prod-workers-old", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "prod-workers-new", Labels: poolLabels("workers", "prod")},
		hcloudtest.ServerInfo{Name: "prod-retired-1", Labels: poolLabels("retired", "prod")},
		hcloudtest.ServerInfo{Name: "prod-retired-2", Labels: poolLabels("retired", "prod")},
	)
	for old, repl := range map[string]string{"prod-workers-old": "prod-workers-new", "prod-retired-1": "prod-retired-2"} {
		labels := poolLabels(strings.Split(old, "-")[1], "prod")
		labels[config.LabelReplaces] = strconv.FormatInt(ids[old], 10)
		if err := p.api.SetServerLabels(ids[repl], labels); err != nil {
			t.Fatal(err)
		}
	}
	node := func(name string, cordoned bool, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec:   corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", ids[name]), Unschedulable: cordoned},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	draining := func(repl string) map[string]string {
		return map[string]string{lifecycle.ReplacementAnnotation: `{"replacement":"` + repl + `","phase":"draining","since":"2026-01-01T00:00:00Z"}`}
	}
	protected := map[string]string{lifecycle.ScaleDownDisabledAnnotation: "true", lifecycle.ProtectsAnnotation: "1"}
	kube := kubefake.NewClientset(
		node("prod-workers-old", true, draining("prod-workers-new")), node("prod-workers-new", false, maps.Clone(protected)),
		node("prod-retired-1", true, draining("prod-retired-2")), node("prod-retired-2", false, maps.Clone(protected)),
	)
	old := newKubeClient
	newKubeClient = func(string, config.Env) (kubernetes.Interface, error) { return kube, nil }
	t.Cleanup(func() { newKubeClient = old })

	r := runCmd(t, runCleanup, p.env(t, map[string]string{"KUBECONFIG": "/kubeconfig"}), append([]string{"--yes", "-o", "json"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	res := decodeJSON[cleanupResult](t, r)
	got := map[string]string{}
	for _, u := range res.RolledBack {
		got[u.Node] = u.Action + u.Error
	}
	want := map[string]string{"prod-workers-old": lifecycle.UndoneRolledBack, "prod-retired-1": lifecycle.UndoneKept}
	if diff := cmp.Diff(want, got); diff != "" || res.RollBackError != "" {
		t.Errorf("rolled back (-want +got):\n%s%s", diff, res.RollBackError)
	}
	// The replacement was deleted by the roll-back, the old server by
	// the cleanup; the pool out of its scope keeps both its servers.
	if diff := cmp.Diff([]string{"prod-workers-old"}, res.Deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"prod-retired-1", "prod-retired-2"}, projectNames(t, p)); diff != "" {
		t.Errorf("servers left (-want +got):\n%s", diff)
	}
	for _, name := range []string{"prod-workers-old", "prod-retired-1"} {
		n, err := kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, marked := n.Annotations[lifecycle.ReplacementAnnotation]; marked || n.Spec.Unschedulable {
			t.Errorf("node %s: cordoned %v, annotations %v; want it serving again", name, n.Spec.Unschedulable, n.Annotations)
		}
	}
	if n, _ := kube.CoreV1().Nodes().Get(t.Context(), "prod-retired-2", metav1.GetOptions{}); n.Annotations[lifecycle.ProtectsAnnotation] != "" {
		t.Errorf("the kept replacement prod-retired-2 keeps its protection: %v", n.Annotations)
	}
}
