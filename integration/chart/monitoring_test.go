package chart

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"helm.sh/helm/v4/pkg/cli/values"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// releaseLabels are the labels that tell the series of one release from
// another's: every alert keeps them, every dashboard query selects them.
var releaseLabels = []string{"cluster", "namespace", "job"}

// alertRule is one alert of a PrometheusRule.
type alertRule struct {
	Alert, Expr, For string
}

// monitoring is what the chart renders for the alerts and the dashboard
// of one release, and the labels its series carry when its ServiceMonitor
// scrapes them.
type monitoring struct {
	namespace, job string
	alerts         []alertRule
	dashboard      dashboardJSON
}

type dashboardJSON struct {
	Templating struct {
		List []struct {
			Name, Type        string
			IncludeAll, Multi bool
			Query             any
		}
	}
	Panels []struct {
		Type, Title string
		Targets     []struct{ Expr string }
	}
}

// renderMonitoring renders the release name in namespace with the
// ServiceMonitor, the PrometheusRule and the dashboard.
func renderMonitoring(t *testing.T, name, namespace string) monitoring {
	t.Helper()
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     []string{"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true"},
	})
	manifest, err := renderChart(t, loadChart(t), name, namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, manifest)
	svc := one[*corev1.Service](t, objs, "Service")
	// prometheus-operator names the job after the Service unless the
	// ServiceMonitor sets a jobLabel.
	sm := find(objs, "ServiceMonitor")
	if len(sm) != 1 {
		t.Fatalf("%d ServiceMonitors; want 1", len(sm))
	}
	if jl, ok, _ := unstructured.NestedString(sm[0].Object, "spec", "jobLabel"); ok {
		t.Fatalf("the ServiceMonitor sets jobLabel %q: the job is no longer the Service's name", jl)
	}
	m := monitoring{namespace: namespace, job: svc.Name}
	rules := find(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules; want 1", len(rules))
	}
	m.alerts = alertsOf(t, rules[0].Object["spec"])
	for _, cm := range find(objs, "ConfigMap") {
		if cm.GetLabels()["grafana_dashboard"] == "1" {
			data, _, _ := unstructured.NestedString(cm.Object, "data", "hcloudscale.json")
			if err := json.Unmarshal([]byte(data), &m.dashboard); err != nil {
				t.Fatalf("dashboard: %v", err)
			}
		}
	}
	if len(m.dashboard.Panels) == 0 {
		t.Fatal("no dashboard rendered")
	}
	return m
}

// alertsOf reads the alerts of a PrometheusRule's spec.
func alertsOf(t *testing.T, spec any) []alertRule {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Groups []struct{ Rules []alertRule } }
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range s.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

func (m monitoring) alert(t *testing.T, name string) alertRule {
	t.Helper()
	i := slices.IndexFunc(m.alerts, func(a alertRule) bool { return a.Alert == name })
	if i < 0 {
		t.Fatalf("no alert %s", name)
	}
	return m.alerts[i]
}

// TestAlertsPerRelease parses every alert with Prometheus' parser: every
// aggregation keeps cluster, namespace and job, every vector matching on
// labels matches on them, so that two releases (or two clusters in one
// Prometheus) never add up to one alert; every absent() names the
// release's own namespace and job, so that a release without series
// alerts even while another one reports; every metric is one the code
// registers. Apart from the absent() selector, the rendered rules are
// those of examples/monitoring.
func TestAlertsPerRelease(t *testing.T) {
	known := documentedMetrics(t)
	var example struct{ Spec any }
	if err := yaml.Unmarshal(readFile(t, "../../examples/monitoring/prometheusrule.yaml"), &example); err != nil {
		t.Fatal(err)
	}
	exampleAlerts := alertsOf(t, example.Spec)
	for _, rel := range []struct{ name, namespace string }{{releaseName, releaseNamespace}, {"autoscaling", "platform"}} {
		t.Run(rel.name+"/"+rel.namespace, func(t *testing.T) {
			m := renderMonitoring(t, rel.name, rel.namespace)
			var absents int
			for _, a := range m.alerts {
				absents += checkAlert(t, m, a, known)
			}
			if absents == 0 {
				t.Error("no alert uses absent(): a release whose pods are all gone alerts on nothing")
			}
			got := slices.Clone(m.alerts)
			for i := range got {
				got[i].Expr = strings.ReplaceAll(got[i].Expr, fmt.Sprintf("namespace=%q, job=%q", m.namespace, m.job), `namespace="kube-system", job="hcloudscale"`)
			}
			if diff := cmp.Diff(exampleAlerts, got); diff != "" {
				t.Errorf("the rendered alerts differ from examples/monitoring/prometheusrule.yaml in more than absent()'s release (-want +got):\n%s", diff)
			}
		})
	}
}

// checkAlert checks one alert of m and returns how many absent() calls
// it has.
func checkAlert(t *testing.T, m monitoring, a alertRule, known map[string]bool) (absents int) {
	t.Helper()
	expr := parseExpr(t, a.Alert, a.Expr)
	for _, vs := range selectors(expr) {
		if !known[vs.Name] {
			t.Errorf("%s: %s is no metric of docs/deploy.md's table (what the code registers)", a.Alert, vs)
		}
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			for _, l := range releaseLabels {
				if n.Without || !slices.Contains(n.Grouping, l) {
					t.Errorf("%s: %s does not keep %s", a.Alert, n, l)
				}
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && len(vm.MatchingLabels) > 0 {
				for _, l := range releaseLabels {
					if vm.On != slices.Contains(vm.MatchingLabels, l) {
						t.Errorf("%s: %s matches across %s", a.Alert, n, l)
					}
				}
			}
		case *parser.Call:
			if n.Func.Name == "absent" || n.Func.Name == "absent_over_time" {
				absents++
				for _, vs := range selectors(n) {
					for l, want := range map[string]string{"namespace": m.namespace, "job": m.job} {
						if mt := matcher(vs.LabelMatchers, l); mt == nil || mt.Type != labels.MatchEqual || mt.Value != want {
							t.Errorf("%s: %s is not this release's: want %s=%q", a.Alert, n, l, want)
						}
					}
				}
			}
		}
		return nil
	})
	return absents
}

// TestAlertsFire evaluates the alerts of a release in namespace platform
// with Prometheus' engine over series of that release and of another one:
// each alert fires for its release's trouble, with the release's labels,
// and for nothing of the other release's.
func TestAlertsFire(t *testing.T) {
	m := renderMonitoring(t, "autoscaling", "platform")
	this := fmt.Sprintf(`namespace=%q, job=%q`, m.namespace, m.job)
	other := `namespace="kube-system", job="hcloudscale"`
	series := func(sel, metric, values string) string { return metric + "{" + sel + "} " + values }
	// The labels an alert's result has: the release's, and the pool's.
	ours := map[string]string{"namespace": m.namespace, "job": m.job}
	pool := map[string]string{"namespace": m.namespace, "job": m.job, "pool": "workers"}
	for _, tc := range []struct {
		name, alert string
		series      []string // one sample a minute
		at          time.Duration
		want        []map[string]string
	}{
		{name: "this release reports nothing, the other leads", alert: "HcloudscaleNoLeader", at: 30 * time.Minute,
			series: []string{series(other, "hcloudscale_leader", "1x60")}, want: []map[string]string{ours}},
		{name: "both lead", alert: "HcloudscaleNoLeader", at: 30 * time.Minute,
			series: []string{series(other, "hcloudscale_leader", "1x60"), series(this+`, pod="a"`, "hcloudscale_leader", "1x60")}},
		{name: "this release's replicas are standbys", alert: "HcloudscaleNoLeader", at: 30 * time.Minute,
			series: []string{series(other, "hcloudscale_leader", "0x60"), series(this+`, pod="a"`, "hcloudscale_leader", "0x60"), series(this+`, pod="b"`, "hcloudscale_leader", "0x60")},
			want:   []map[string]string{ours, {"namespace": "kube-system", "job": "hcloudscale"}}},
		{name: "one leader in each release", alert: "HcloudscaleSeveralLeaders", at: 30 * time.Minute,
			series: []string{series(other, "hcloudscale_leader", "1x60"), series(this+`, pod="a"`, "hcloudscale_leader", "1x60")}},
		{name: "two leaders in this release", alert: "HcloudscaleSeveralLeaders", at: 30 * time.Minute,
			series: []string{series(this+`, pod="a"`, "hcloudscale_leader", "1x60"), series(this+`, pod="b"`, "hcloudscale_leader", "1x60")}, want: []map[string]string{ours}},
		{name: "a replacement failed", alert: "HcloudscaleReplacementsFailed", at: 40 * time.Minute,
			series: []string{series(this+`, pool="workers", result="failed"`, "hcloudscale_replacements_total", "0x30 1x30"),
				series(other+`, pool="workers", result="failed"`, "hcloudscale_replacements_total", "0x60")},
			want: []map[string]string{pool}},
		{name: "replacements done, none failed", alert: "HcloudscaleReplacementsFailed", at: 40 * time.Minute,
			series: []string{series(this+`, pool="workers", result="done"`, "hcloudscale_replacements_total", "0x30 1x30"),
				series(this+`, pool="workers", result="failed"`, "hcloudscale_replacements_total", "0x60")}},
		{name: "a replacement stopped", alert: "HcloudscaleReplacementsStopped", at: 40 * time.Minute,
			series: []string{series(this+`, pool="workers", result="stopped"`, "hcloudscale_replacements_total", "0x30 1x30")},
			want:   []map[string]string{pool}},
		{name: "the autoscaler refuses serve's certificate", alert: "HcloudscaleHandshakesRefused", at: 40 * time.Minute,
			series: []string{series(this+`, pod="a", reason="server_certificate_refused"`, "hcloudscale_tls_handshake_failures_total", "0x30 1x30"),
				series(this+`, pod="a", reason="expired"`, "hcloudscale_tls_handshake_failures_total", "0x60")},
			want: []map[string]string{{"namespace": m.namespace, "job": m.job, "reason": "server_certificate_refused"}}},
		{name: "above max without a replacement", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pool="workers"`, "hcloudscale_pool_target_size", "4x60"), series(this+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60"),
				series(other+`, pool="workers"`, "hcloudscale_pool_target_size", "3x60"), series(other+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60")},
			want: []map[string]string{pool}},
		{name: "above max while a replacement surges", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pool="workers"`, "hcloudscale_pool_target_size", "4x60"), series(this+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60"),
				series(this+`, pool="workers", reason="expired", state="in_progress"`, "hcloudscale_replacement_nodes", "1x60")}},
		{name: "at max", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pool="workers"`, "hcloudscale_pool_target_size", "3x60"), series(this+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60")}},
		// A pool with offerings: each group's max is the pool's max less
		// what the others hold, so no group is above its own max; the sum
		// under the pool's name is what the pool's max bounds. Two
		// replicas report the same groups.
		{name: "offerings above the pool's max together", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pod="a", pool="workers"`, "hcloudscale_pool_target_size", "2x60"), series(this+`, pod="a", pool="workers@cx33-nbg1"`, "hcloudscale_pool_target_size", "2x60"),
				series(this+`, pod="b", pool="workers"`, "hcloudscale_pool_target_size", "2x60"), series(this+`, pod="b", pool="workers@cx33-nbg1"`, "hcloudscale_pool_target_size", "2x60"),
				series(this+`, pod="a", pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60"), series(this+`, pod="b", pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60"),
				series(this+`, pod="a", pool="workers@cx33-nbg1"`, "hcloudscale_pool_max_size", "2x60")},
			want: []map[string]string{pool}},
		{name: "offerings at the pool's max together", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pool="workers"`, "hcloudscale_pool_target_size", "1x60"), series(this+`, pool="workers@cx33-nbg1"`, "hcloudscale_pool_target_size", "2x60"),
				series(this+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60")}},
		{name: "offerings above the max while one's node is replaced", alert: "HcloudscalePoolAboveMax", at: 30 * time.Minute,
			series: []string{series(this+`, pool="workers"`, "hcloudscale_pool_target_size", "2x60"), series(this+`, pool="workers@cx33-nbg1"`, "hcloudscale_pool_target_size", "2x60"),
				series(this+`, pool="workers"`, "hcloudscale_pool_configured_max_size", "3x60"),
				series(this+`, pool="workers@cx33-nbg1", reason="offering", state="in_progress"`, "hcloudscale_replacement_nodes", "1x60")}},
	} {
		t.Run(tc.alert+"/"+tc.name, func(t *testing.T) {
			a := m.alert(t, tc.alert)
			var got []map[string]string
			for _, s := range loadSeries(t, time.Minute, tc.series...).eval(t, a.Expr, tc.at) {
				got = append(got, s.Metric.Map())
			}
			byText := func(x, y map[string]string) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) }
			slices.SortFunc(got, byText)
			slices.SortFunc(tc.want, byText)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s = %q: fires for (-want +got):\n%s", tc.alert, a.Expr, diff)
			}
		})
	}
}

// TestDashboardPerRelease: the dashboard has cluster, namespace and job
// variables, each query of a variable narrowed by those before it, and
// every panel query (parsed with Prometheus' parser) selects the three
// with an equality matcher, so that a view shows one release; every
// metric is one the code registers; the node lifecycle has its panels.
func TestDashboardPerRelease(t *testing.T) {
	known := documentedMetrics(t)
	m := renderMonitoring(t, "autoscaling", "platform")
	var order []string
	for _, v := range m.dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		query, _ := q["query"].(string)
		args := strings.TrimSuffix(strings.TrimPrefix(query, "label_values("), ")")
		i := strings.LastIndex(args, ", ")
		if i < 0 || args[i+2:] != v.Name {
			t.Errorf("variable %s: query %q is not label_values(<selector>, %s)", v.Name, query, v.Name)
			continue
		}
		sel := args[:i]
		ms, err := promParser.ParseMetricSelector(sel)
		if err != nil {
			t.Errorf("variable %s: %q: %v", v.Name, sel, err)
			continue
		}
		for _, before := range order {
			if mt := matcher(ms, before); mt == nil || mt.Type != labels.MatchEqual || mt.Value != "$"+before {
				t.Errorf("variable %s: %q does not narrow by %s=\"$%s\"", v.Name, sel, before, before)
			}
		}
		if slices.Contains(releaseLabels, v.Name) {
			if v.Multi || v.IncludeAll {
				t.Errorf("variable %s takes several values: a view must show one release", v.Name)
			}
			order = append(order, v.Name)
		}
	}
	if !slices.Equal(order, releaseLabels) {
		t.Errorf("variables %q; want %q in that order", order, releaseLabels)
	}
	used := map[string]bool{}
	for _, p := range m.dashboard.Panels {
		for _, tg := range p.Targets {
			expr := parseExpr(t, "panel "+p.Title, strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
			for _, vs := range selectors(expr) {
				used[vs.Name] = true
				if !known[vs.Name] {
					t.Errorf("panel %s: %s is no metric of docs/deploy.md's table (what the code registers)", p.Title, vs)
				}
				for _, l := range releaseLabels {
					if mt := matcher(vs.LabelMatchers, l); mt == nil || mt.Type != labels.MatchEqual || mt.Value != "$"+l {
						t.Errorf("panel %s: %s does not select %s=\"$%s\"", p.Title, vs, l, l)
					}
				}
			}
		}
	}
	for _, want := range []string{"hcloudscale_replacement_nodes", "hcloudscale_replacements_total", "hcloudscale_replacement_surge", "hcloudscale_pool_drifted_servers"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
