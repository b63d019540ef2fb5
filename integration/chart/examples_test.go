package chart

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/cli/values"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "regenerate the files generated from the chart")

const exampleDir = "../../examples/externalgrpc"

// generated are the files of examples/externalgrpc made from the chart:
// the cert-manager objects go to certificates.yaml, the rest to
// hcloudscale.yaml.
var generated = []struct {
	file    string
	certMgr bool
}{
	{"hcloudscale.yaml", false},
	{"certificates.yaml", true},
}

const generatedHeader = `# Generated from charts/hcloudscale by
#   helm template hcloudscale charts/hcloudscale --namespace kube-system \
#     --api-versions cert-manager.io/v1/Certificate \
#     -f examples/externalgrpc/hcloudscale-values.yaml
# Do not edit: change hcloudscale-values.yaml or the chart, then run
#   (cd integration && go test ./chart -run TestExamplesCurrent -update)
`

// TestExamplesCurrent keeps examples/externalgrpc/hcloudscale.yaml and
// certificates.yaml what the chart renders from hcloudscale-values.yaml,
// so the raw manifests and the chart cannot drift apart. With -update it
// writes them.
func TestExamplesCurrent(t *testing.T) {
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(exampleDir, "hcloudscale-values.yaml")}})
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	var docs [2][]string
	for doc := range strings.SplitSeq(manifest, "\n---\n") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---\n"))
		if doc == "" {
			continue
		}
		i := 0
		if strings.Contains(doc, "\napiVersion: cert-manager.io/") || strings.HasPrefix(doc, "apiVersion: cert-manager.io/") {
			i = 1
		}
		docs[i] = append(docs[i], doc+"\n")
	}
	for i, g := range generated {
		if len(docs[i]) == 0 {
			t.Fatalf("%s: no objects rendered", g.file)
		}
		want := generatedHeader + "---\n" + strings.Join(docs[i], "---\n")
		path := filepath.Join(exampleDir, g.file)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what the chart renders from hcloudscale-values.yaml; run go test ./chart -run TestExamplesCurrent -update (-want +got):\n%s",
				path, cmp.Diff(strings.Split(want, "\n"), strings.Split(string(got), "\n")))
		}
	}
}

// TestMonitoringFilesMatchExamples: the chart's copies of the dashboard
// and the alerts (a chart cannot read files outside its directory) are
// those of examples/monitoring, which cmd/hcloudscale's
// TestMonitoringExamples checks against serve's metrics; the rendered
// PrometheusRule has the example's rules.
func TestMonitoringFilesMatchExamples(t *testing.T) {
	for _, f := range []string{"grafana-dashboard.json", "prometheusrule.yaml"} {
		example := filepath.Join("../../examples/monitoring", f)
		copied := filepath.Join(chartDir, "files", f)
		if *update {
			if err := os.WriteFile(copied, readFile(t, example), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(readFile(t, example), readFile(t, copied)) {
			t.Errorf("%s differs from %s; run go test ./chart -run TestMonitoringFilesMatchExamples -update", copied, example)
		}
	}
	objs := mustRender(t, mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     []string{"metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true"},
	}))
	var example map[string]any
	if err := yaml.Unmarshal(readFile(t, "../../examples/monitoring/prometheusrule.yaml"), &example); err != nil {
		t.Fatal(err)
	}
	rules := find(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules; want 1", len(rules))
	}
	if diff := cmp.Diff(example["spec"], rules[0].Object["spec"]); diff != "" {
		t.Errorf("PrometheusRule spec differs from examples/monitoring/prometheusrule.yaml (-want +got):\n%s", diff)
	}
	dashboards := find(objs, "ConfigMap")
	found := false
	for _, cm := range dashboards {
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		found = true
		data, _ := cm.Object["data"].(map[string]any)
		var got, want any
		if err := json.Unmarshal([]byte(data["hcloudscale.json"].(string)), &got); err != nil {
			t.Fatalf("dashboard ConfigMap: %v", err)
		}
		if err := json.Unmarshal(readFile(t, "../../examples/monitoring/grafana-dashboard.json"), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dashboard ConfigMap differs from the example (-want +got):\n%s", diff)
		}
	}
	if !found {
		t.Error("no ConfigMap with the Grafana sidecar's label grafana_dashboard: \"1\"")
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, path), &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}
