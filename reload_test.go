package hcloudscale_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// configMapDir is a directory laid out as the kubelet lays out a
// ConfigMap volume: the file is a symlink through ..data, a symlink to a
// timestamped directory that an update replaces by swapping ..data.
type configMapDir struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMapDir(t *testing.T, content []byte) *configMapDir {
	d := &configMapDir{t: t, dir: t.TempDir()}
	d.update(content)
	if err := os.Symlink(filepath.Join("..data", "cluster-config.json"), d.path()); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *configMapDir) path() string { return filepath.Join(d.dir, "cluster-config.json") }

// update writes content to a new directory and swaps ..data to it, then
// removes the old directory.
func (d *configMapDir) update(content []byte) {
	d.t.Helper()
	d.n++
	gen := filepath.Join(d.dir, "..gen"+itoa(int64(d.n)))
	if err := os.Mkdir(gen, 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "cluster-config.json"), content, 0o644); err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
	if d.n > 1 {
		if err := os.RemoveAll(filepath.Join(d.dir, "..gen"+itoa(int64(d.n-1)))); err != nil {
			d.t.Fatal(err)
		}
	}
}

func marshal(t *testing.T, cc clusterConfig) []byte {
	t.Helper()
	data, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fileEnv is p.env with the cluster config in the file at path.
func (p *project) fileEnv(path string) config.Env {
	vars := map[string]string{
		"HCLOUD_TOKEN":               p.api.Token(),
		"HCLOUD_ENDPOINT":            p.api.URL(),
		"HCLOUD_CLUSTER_CONFIG_FILE": path,
		"HCLOUD_NETWORK":             "k8s",
		"HCLOUD_FIREWALL":            "nodes",
		"HCLOUD_SSH_KEY":             "ops",
	}
	return config.Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, ReadFile: os.ReadFile}
}

type reloadEnv struct {
	p    *project
	dir  *configMapDir
	c    *hcloudscale.Cluster
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

// newReloadEnv starts a Cluster from a ConfigMap-like file holding cc,
// with the --nodes specs nodes, that reloads the file at every Refresh.
func newReloadEnv(t *testing.T, cc clusterConfig, nodes []string) *reloadEnv {
	p := newProject(t, fastActions())
	dir := newConfigMapDir(t, marshal(t, cc))
	env := p.fileEnv(dir.path())
	cfg, err := config.Load(env, nodes)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	reg := prometheus.NewRegistry()
	c := newCluster(t, cfg, hcloudscale.WithLogger(zap.New(core)), hcloudscale.WithRegisterer(reg),
		hcloudscale.WithConfigFileReload(env, nodes, cfg), hcloudscale.WithReloadInterval(time.Nanosecond))
	return &reloadEnv{p: p, dir: dir, c: c, logs: logs, reg: reg}
}

func (e *reloadEnv) refresh(t *testing.T) {
	t.Helper()
	if err := e.c.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

func (e *reloadEnv) count(msg string) int {
	return e.logs.FilterMessageSnippet(msg).Len()
}

func (e *reloadEnv) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestReloadFollowsAConfigMapUpdate(t *testing.T) {
	e := newReloadEnv(t, healthyClusterConfig(), []string{"0:5:cpx21:fsn1:workers"})
	e.refresh(t)
	st := e.c.ReloadStatus()
	if !st.Current || st.RunningSHA256 == "" || st.RunningSHA256 != st.FileSHA256 || st.Err != nil {
		t.Errorf("status after the first Refresh = %+v; want current", st)
	}
	if n := e.count("configuration applied"); n != 0 {
		t.Errorf("%d reconfigurations for the file New was given; want 0", n)
	}

	cc := healthyClusterConfig()
	cc["nodeConfigs"].(map[string]any)["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3}
	cc["nodeConfigs"].(map[string]any)["dedicated"].(map[string]any)["maxSize"] = 9 // declares it now
	cc["nodeConfigs"].(map[string]any)["dedicated"].(map[string]any)["serverType"] = "ccx13"
	cc["nodeConfigs"].(map[string]any)["dedicated"].(map[string]any)["location"] = "hel1"
	e.dir.update(marshal(t, cc))
	e.refresh(t)
	if diff := cmp.Diff([]string{"workers", "dedicated", "extra"}, poolNames(e.c)); diff != "" {
		t.Errorf("pools after the update (-want +got):\n%s", diff)
	}
	st = e.c.ReloadStatus()
	if !st.Current || st.Err != nil || st.Applied.IsZero() {
		t.Errorf("status after the update = %+v; want current, applied", st)
	}
	if got := e.metric(t, "hcloudscale_config_reload_success"); got != 1 {
		t.Errorf("hcloudscale_config_reload_success = %v; want 1", got)
	}
	if got := e.metric(t, "hcloudscale_config_last_reload_timestamp_seconds"); got == 0 {
		t.Error("hcloudscale_config_last_reload_timestamp_seconds = 0 after a reload")
	}
	e.refresh(t)
	if n := e.count("configuration applied"); n != 1 {
		t.Errorf("%d reconfigurations after one update and two Refreshes; want 1", n)
	}
}

func TestReloadOfABrokenFileChangesNothing(t *testing.T) {
	nodes := []string{"0:5:cpx21:fsn1:workers"}
	e := newReloadEnv(t, healthyClusterConfig(), nodes)
	e.refresh(t)
	running := e.c.Config()

	next := healthyClusterConfig()
	next["nodeConfigs"].(map[string]any)["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 3}
	full := marshal(t, next)
	for _, tt := range []struct {
		name    string
		content []byte
		want    []string // in the error, all at once
	}{
		{"half-written", full[:len(full)/2], []string{"invalid JSON"}},
		{"invalid values", []byte(`{"clusterName": "prod", "nodeConfigs": {"workers": {"maxPods": 0, "taints": [{"key": "a", "effect": "Nope"}]}, "x": {"minSize": 2}}}`),
			[]string{"nodeConfigs.workers.maxPods", "nodeConfigs.workers.taints[0].effect", "nodeConfigs.x.serverType: required"}},
		{"a pool in --nodes and the file that disagree", []byte(`{"clusterName": "prod", "nodeConfigs": {"workers": {"maxSize": 7}}}`),
			[]string{"nodeConfigs.workers.maxSize, --nodes[0] (workers)"}},
		{"a reference the API does not have", []byte(`{"clusterName": "prod", "nodeConfigs": {"workers": {"firewalls": ["gone"]}}}`),
			[]string{`firewall "gone" does not exist`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.count("configuration file does not load; the running configuration stays") + e.count("configuration file not applied; the running configuration stays")
			e.dir.update(tt.content)
			for range 3 {
				e.refresh(t)
			}
			if e.c.Config() != running {
				t.Error("the running configuration changed")
			}
			st := e.c.ReloadStatus()
			if st.Current || st.Err == nil || st.FileSHA256 == st.RunningSHA256 {
				t.Fatalf("status = %+v; want not current, with the error", st)
			}
			for _, w := range tt.want {
				if !strings.Contains(st.Err.Error(), w) {
					t.Errorf("status error lacks %q:\n%v", w, st.Err)
				}
			}
			after := e.count("configuration file does not load; the running configuration stays") + e.count("configuration file not applied; the running configuration stays")
			if after-before != 1 {
				t.Errorf("logged %d times over three Refreshes; want once per content", after-before)
			}
			if got := e.metric(t, "hcloudscale_config_reload_success"); got != 0 {
				t.Errorf("hcloudscale_config_reload_success = %v; want 0", got)
			}
			if want := `hcloudscale_config_info{file="` + e.dir.path() + `",file_sha256="` + st.FileSHA256 + `",running_sha256="` + st.RunningSHA256 + `"} 1`; !strings.Contains(gatherText(t, e.reg), want) {
				t.Errorf("metrics lack %s", want)
			}
		})
	}

	// The complete file is picked up at the next Refresh.
	e.dir.update(full)
	e.refresh(t)
	if st := e.c.ReloadStatus(); !st.Current || e.c.Pool("extra") == nil {
		t.Errorf("after the complete file: status %+v, pools %v; want current with extra", st, poolNames(e.c))
	}
}

func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n == 0 {
		t.Fatalf("gather: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName() + "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
			}
			b.WriteString("} ")
			if g := m.GetGauge(); g != nil {
				b.WriteString(strconvFloat(g.GetValue()))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The warnings of a reloaded file say why a change may not be what was
// meant: they are logged once, and Warnings() returns them.
func TestReloadLogsAndKeepsTheWarningsOfAFile(t *testing.T) {
	e := newReloadEnv(t, healthyClusterConfig(), []string{"0:5:cpx21:fsn1:workers"})
	e.refresh(t)
	cc := healthyClusterConfig()
	cc["nodeConfigs"].(map[string]any)["extra"] = map[string]any{"ServerType": "cx33", "location": "nbg1", "maxSize": 0}
	e.dir.update(marshal(t, cc))
	for range 3 {
		e.refresh(t)
	}
	if e.c.Pool("extra") == nil {
		t.Fatalf("pool extra not added: %v", poolNames(e.c))
	}
	for _, want := range []string{`nodeConfigs.extra.ServerType: key matched "serverType" ignoring case`, "nodeConfigs.extra.maxSize: 0: the pool is parked"} {
		if !slices.ContainsFunc(e.c.Warnings(), func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("Warnings() lacks %q: %q", want, e.c.Warnings())
		}
		if n := e.count(want); n != 1 {
			t.Errorf("warning %q logged %d times over three Refreshes; want once", want, n)
		}
	}
	applied := e.logs.FilterMessage("configuration file applied with warnings: check that it does what was meant")
	if applied.Len() != 1 || e.count("configuration file applied") != 1 {
		t.Fatalf("logged %d 'applied with warnings' and %d 'applied' lines; want one, with warnings", applied.Len(), e.count("configuration file applied"))
	}
	if lvl := applied.All()[0].Level; lvl != zapcore.WarnLevel {
		t.Errorf("a file applied with warnings is logged at %v; want warn", lvl)
	}

	// Back to a file without warnings: Warnings() follows.
	e.dir.update(marshal(t, healthyClusterConfig()))
	e.refresh(t)
	if w := e.c.Warnings(); slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "nodeConfigs.extra") }) {
		t.Errorf("Warnings() keeps the warnings of a file that no longer runs: %q", w)
	}
}

// Each refused content is logged, also when its error reads as the one
// before, and the gauge says a restart would fail.
func TestReloadLogsEveryRefusedContent(t *testing.T) {
	e := newReloadEnv(t, healthyClusterConfig(), []string{"0:5:cpx21:fsn1:workers"})
	e.refresh(t)
	if got := e.metric(t, "hcloudscale_config_file_refused"); got != 0 {
		t.Errorf("hcloudscale_config_file_refused = %v with the file running; want 0", got)
	}
	bad := `{"clusterName": "prod", "nodeConfigs": {"workers": {"firewalls": ["gone"]}}}`
	for i, content := range []string{bad, bad + "\n", bad + "\n\n"} {
		e.dir.update([]byte(content))
		e.refresh(t)
		e.refresh(t)
		if n := e.count("configuration file not applied; the running configuration stays. A restart"); n != i+1 {
			t.Errorf("after %d refused contents with the same error: %d log lines; want %d", i+1, n, i+1)
		}
		if got := e.metric(t, "hcloudscale_config_file_refused"); got != 1 {
			t.Errorf("hcloudscale_config_file_refused = %v with a refused file; want 1", got)
		}
	}
	e.dir.update([]byte(`{"clusterName": "prod", "nodeConfigs": {`))
	e.refresh(t)
	if n := e.count("configuration file does not load; the running configuration stays. A restart (rollout, eviction, crash) would read this file and fail to start"); n != 1 {
		t.Errorf("a file that does not load: %d log lines naming the restart risk; want 1", n)
	}
	e.dir.update(marshal(t, healthyClusterConfig()))
	e.refresh(t)
	if got := e.metric(t, "hcloudscale_config_file_refused"); got != 0 {
		t.Errorf("hcloudscale_config_file_refused = %v once the file is good again; want 0", got)
	}
}
