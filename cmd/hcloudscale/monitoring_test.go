package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// servedMetricNames runs serve against a fake project, drives it through
// a scale-up, a sold-out scale-up and a delete, so that every metric has a
// series, and returns the families /metrics exposes with their types.
func servedMetricNames(t *testing.T) map[string]string {
	t.Helper()
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(20 * time.Millisecond))
	t.Cleanup(fake.Close)
	doc, err := json.Marshal(map[string]any{"nodeConfigs": map[string]any{
		"workers": map[string]any{"cloudInit": "#cloud-config\n"},
		"spot":    map[string]any{"cloudInit": "#cloud-config\n"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The cluster config comes from a file, as deployed, so that the
	// reload metrics are exposed too.
	env := config.MapEnv(map[string]string{
		config.EnvToken:             fake.Token(),
		config.EnvEndpoint:          fake.URL(),
		config.EnvClusterConfigFile: "/etc/hcloudscale/cluster-config.json",
	}, map[string]string{"/etc/hcloudscale/cluster-config.json": string(doc)})
	// With mutual TLS, as deployed, so that the certificate metrics are
	// exposed too.
	p := newTestPKI(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- runServe(ctx, []string{"--nodes", "0:3:cx23:fsn1:workers", "--nodes", "0:3:cpx21:nbg1:spot",
			"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.caFile, "--tls-client-name", testClientName}, io.Discard, stderr, env)
	}()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	serving := waitForLog(t, stderr, exited, "serving")
	creds := func(certs ...tls.Certificate) grpc.DialOption {
		return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.roots, Certificates: certs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}))
	}
	conn, err := grpc.NewClient(serving["listen"].(string), creds(p.client))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A client without a certificate: its refused handshake is counted.
	if refused, err := grpc.NewClient(serving["listen"].(string), creds()); err == nil {
		_, _ = protos.NewCloudProviderClient(refused).Refresh(func() context.Context {
			c, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			t.Cleanup(cancel)
			return c
		}(), &protos.RefreshRequest{})
		_ = refused.Close()
	}
	client := protos.NewCloudProviderClient(conn)
	call := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		t.Cleanup(cancel)
		return c
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stderr:\n%s", what, stderr.String())
			}
		}
	}

	if _, err := client.Refresh(call(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if _, err := client.NodeGroupIncreaseSize(call(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize(workers): %v", err)
	}
	fake.SetUnavailable("cpx21", "nbg1", true)
	if _, err := client.NodeGroupIncreaseSize(call(), &protos.NodeGroupIncreaseSizeRequest{Id: "spot", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize(spot): %v", err)
	}
	nodes := func(group string) []*protos.Instance {
		res, err := client.NodeGroupNodes(call(), &protos.NodeGroupNodesRequest{Id: group})
		if err != nil {
			t.Fatalf("NodeGroupNodes(%s): %v", group, err)
		}
		return res.GetInstances()
	}
	eventually("the spot create to fail", func() bool {
		in := nodes("spot")
		return len(in) == 1 && in[0].GetStatus().GetErrorInfo() != nil
	})
	metricsURL := "http://" + serving["metrics_listen"].(string) + "/metrics"
	// The server runs once its create flow has observed the duration.
	eventually("the workers server to run", func() bool {
		return strings.Contains(get(t, metricsURL), `hcloudscale_server_create_duration_seconds_count{pool="workers"} 1`)
	})
	running, err := fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil || len(running) != 1 {
		t.Fatalf("workers servers: %v, %v; want 1", running, err)
	}
	if _, err := client.NodeGroupDeleteNodes(call(), &protos.NodeGroupDeleteNodesRequest{Id: "workers",
		Nodes: []*protos.ExternalGrpcNode{{ProviderID: fmt.Sprintf("hcloud://%d", running[0].ID), Name: running[0].Name}}}); err != nil {
		t.Fatalf("NodeGroupDeleteNodes: %v", err)
	}
	eventually("the delete to be counted", func() bool {
		return strings.Contains(get(t, metricsURL), `hcloudscale_server_deletes_total{`)
	})

	families := map[string]string{}
	typeLine := regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	for _, m := range typeLine.FindAllStringSubmatch(get(t, metricsURL), -1) {
		families[m[1]] = m[2]
	}
	return families
}

// describedMetricNames are the families the Cluster and the node
// lifecycle (serve --replace-nodes, which needs a Kubernetes API server)
// register, as their collectors describe them: a family of labelled
// series has none on /metrics until something happens (a spread group
// limit, a replacement).
func describedMetricNames(t *testing.T) map[string]string {
	t.Helper()
	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	cfg, err := config.Load(config.MapEnv(map[string]string{config.EnvToken: fake.Token(), config.EnvEndpoint: fake.URL(), config.EnvCloudInit: "I2Nsb3VkLWNvbmZpZwo="}, nil), []string{"0:3:cx23:fsn1:workers"})
	if err != nil {
		t.Fatal(err)
	}
	rec := describedNames{}
	cluster, err := hcloudscale.New(t.Context(), cfg, hcloudscale.WithRegisterer(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close(context.Background()) })
	ctrl, err := lifecycle.New(cluster, kubefake.NewClientset(), lifecycle.WithRegisterer(rec))
	if err != nil {
		t.Fatal(err)
	}
	ctrl.Close()
	return rec
}

// describedNames is a prometheus.Registerer that keeps the names its
// collectors describe (the type is not described: "").
type describedNames map[string]string

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describedNames) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for desc := range descs {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = ""
		}
	}
	return nil
}

func (d describedNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (describedNames) Unregister(prometheus.Collector) bool { return true }

var registered = struct {
	once     sync.Once
	families map[string]string
}{}

// registeredMetrics are the families serve registers, with their types
// where /metrics showed them: those serve exposed when driven, and those
// the Cluster's and the lifecycle's collectors describe.
func registeredMetrics(t *testing.T) map[string]string {
	t.Helper()
	registered.once.Do(func() {
		families := servedMetricNames(t)
		for name := range describedMetricNames(t) {
			if _, ok := families[name]; !ok {
				families[name] = ""
			}
		}
		registered.families = families
	})
	if registered.families == nil {
		t.Fatal("the registered metrics were not found")
	}
	return registered.families
}

// seriesNames are the series names of families: _bucket, _sum and _count
// of histograms and summaries too.
func seriesNames(families map[string]string) map[string]bool {
	names := map[string]bool{}
	for name, typ := range families {
		names[name] = true
		switch typ {
		case "histogram":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "summary":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// TestMetricsTable: the table of docs/deploy.md's "Metrics" lists every
// family serve registers, and nothing else, but the Go and process
// collectors' (integration/chart checks the alerts and the dashboard
// against the table with Prometheus' parser).
func TestMetricsTable(t *testing.T) {
	var want []string
	for name := range registeredMetrics(t) {
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			want = append(want, name)
		}
	}
	raw, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n### Metrics\n")
	if start < 0 {
		t.Fatal("docs/deploy.md has no ### Metrics section")
	}
	doc = doc[start+1:]
	if end := strings.Index(doc[1:], "\n#"); end >= 0 {
		doc = doc[:end+1]
	}
	var got []string
	name := regexp.MustCompile("`([a-z_]+)`")
	for line := range strings.SplitSeq(doc, "\n") {
		if cells := strings.Split(line, "|"); strings.HasPrefix(line, "| `") && len(cells) > 2 {
			for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
				got = append(got, m[1])
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/deploy.md's metrics table is not what serve registers (-registered +table):\n%s", diff)
	}
}

// metricRef finds the metric names of ours and hcloud-go's in PromQL.
var metricRef = regexp.MustCompile(`\b(?:hcloudscale|hcloud)_[A-Za-z0-9_]+\b|\bprocess_cpu_seconds_total\b`)

// TestMonitoringExamples keeps examples/monitoring in step with the code:
// every metric the dashboard and the alerts query is one serve exposes,
// every query uses one, the dashboard shows what operators need and the
// rule has the alerts the README promises.
func TestMonitoringExamples(t *testing.T) {
	served := seriesNames(registeredMetrics(t))

	raw, err := os.ReadFile("../../examples/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type, Title string
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	exprs := map[string]string{} // expr -> where
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs[tg.Expr] = "dashboard panel " + p.Title
		}
	}

	raw, err = os.ReadFile("../../examples/monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml: kind %q; want PrometheusRule", rule.Kind)
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			exprs[r.Expr] = "alert " + r.Alert
		}
	}
	for _, want := range []string{"HcloudscaleFailedInstances", "HcloudscaleAPIBudgetLow", "HcloudscaleCreateErrors", "HcloudscaleNoLeader"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("prometheusrule.yaml has no alert %s (has %q)", want, alerts)
		}
	}

	used := map[string]bool{}
	for expr, where := range exprs {
		refs := metricRef.FindAllString(expr, -1)
		if len(refs) == 0 {
			t.Errorf("%s: %q queries none of hcloudscale's metrics", where, expr)
		}
		for _, name := range refs {
			used[name] = true
			if !served[name] {
				t.Errorf("%s: %q uses %s, which serve does not expose", where, expr, name)
			}
		}
	}
	// What the dashboard and alerts are for.
	for _, want := range []string{
		"hcloudscale_pool_target_size", "hcloudscale_pool_instances", "hcloudscale_pool_pending_claims",
		"hcloudscale_server_create_duration_seconds_bucket", "hcloudscale_server_creates_total",
		"hcloudscale_unavailable_offerings", "hcloudscale_api_ratelimit_remaining",
		"hcloudscale_api_ratelimit_estimated_remaining", "hcloudscale_api_pacer_waits_total",
		"hcloudscale_api_rate_limited_total", "hcloudscale_leader", "hcloudscale_build_info",
		"hcloudscale_replacement_nodes", "hcloudscale_replacements_total", "hcloudscale_replacement_surge",
	} {
		if !served[want] {
			t.Errorf("serve does not expose %s", want)
		}
		if !used[want] {
			t.Errorf("neither the dashboard nor the alerts use %s", want)
		}
	}
}
