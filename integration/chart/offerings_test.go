package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/config"
)

// recommendedExpander is the autoscaler's --expander that docs/configuration.md
// and docs/design-offerings.md recommend for pools with offerings.
const recommendedExpander = "priority,least-waste"

// officialExpanderValues are the official cluster-autoscaler chart's
// values an example shows for its pools in a comment.
type officialExpanderValues struct {
	ExtraArgs          struct{ Expander string } `json:"extraArgs"`
	ExpanderPriorities string                    `json:"expanderPriorities"`
}

// commentedYAML returns the YAML of a comment block of file: the lines
// "#   <first>" and those after it that start with "#   " (or are "#"
// alone inside the block), without that prefix.
func commentedYAML(t *testing.T, file, first string) []byte {
	t.Helper()
	const prefix = "#   "
	var out []string
	in := false
	for line := range strings.SplitSeq(string(readFile(t, file)), "\n") {
		switch {
		case !in && line == prefix+first:
			in = true
		case !in:
			continue
		case !strings.HasPrefix(line, prefix):
			return []byte(strings.Join(append(out, ""), "\n"))
		}
		out = append(out, strings.TrimPrefix(line, prefix))
	}
	if !in {
		t.Fatalf("%s has no comment block starting %q", file, prefix+first)
	}
	return []byte(strings.Join(append(out, ""), "\n"))
}

// TestOfferingsExamples renders each example of a pool with offerings (the
// commented one in values.yaml, ci/config-pools-values.yaml), loads serve's
// configuration from the rendered pod, and checks that the official
// autoscaler chart's values the example shows next to it are what
// `hcloudscale priorities` prints for that configuration
// (config.PrioritiesYAML, its output) with the recommended expander. With
// HCLOUDSCALE_CA_CHART (a checkout of the official chart) it also renders
// that chart with them: its priority-expander ConfigMap must hold them.
func TestOfferingsExamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		// vals are the example's values of this chart.
		vals func(t *testing.T) map[string]any
		// file holds the official chart's values in a comment.
		file string
	}{
		{"values.yaml", func(t *testing.T) map[string]any {
			vals := mergeValues(t, values.Options{Values: []string{"image.repository=registry.example.com/hcloudscale", "hcloud.token=example-token"}})
			var example map[string]any
			if err := yaml.UnmarshalStrict(commentedYAML(t, filepath.Join(chartDir, "values.yaml"), "clusterConfig:"), &example); err != nil {
				t.Fatalf("values.yaml's commented clusterConfig: %v", err)
			}
			vals["clusterConfig"] = example["clusterConfig"]
			return vals
		}, filepath.Join(chartDir, "values.yaml")},
		{"ci/config-pools-values.yaml", func(t *testing.T) map[string]any {
			return mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "config-pools-values.yaml")}})
		}, filepath.Join(chartDir, "ci", "config-pools-values.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.vals(t))
			cfg, err := loadRenderedConfig(t, objs, one[*appsv1.Deployment](t, objs, "Deployment"))
			if err != nil {
				t.Fatalf("serve's configuration from the rendered pod: %v", err)
			}
			offerings := 0
			for _, p := range cfg.Pools {
				offerings += len(p.OfferingGroups()) - 1
			}
			if offerings == 0 {
				t.Fatal("no pool of the example has an offering besides its own type and location")
			}
			var shown officialExpanderValues
			if err := yaml.UnmarshalStrict(commentedYAML(t, tc.file, "extraArgs:"), &shown); err != nil {
				t.Fatalf("%s's commented autoscaler values: %v", tc.file, err)
			}
			want := config.PrioritiesYAML(cfg.Priorities())
			if shown.ExpanderPriorities != want {
				t.Errorf("%s shows expanderPriorities:\n%s\n`hcloudscale priorities` prints for its configuration:\n%s", tc.file, shown.ExpanderPriorities, want)
			}
			if shown.ExtraArgs.Expander != recommendedExpander {
				t.Errorf("%s shows extraArgs.expander %q; the docs recommend %q", tc.file, shown.ExtraArgs.Expander, recommendedExpander)
			}
			checkOfficialPriorities(t, commentedYAML(t, tc.file, "extraArgs:"), want)
		})
	}
}

// checkOfficialPriorities renders the official cluster-autoscaler chart
// (HCLOUDSCALE_CA_CHART) with the example's values on top of
// examples/externalgrpc/cluster-autoscaler-values.yaml: its ConfigMap
// cluster-autoscaler-priority-expander must hold want. Without a
// checkout it does nothing.
func checkOfficialPriorities(t *testing.T, example []byte, want string) {
	t.Helper()
	dir := os.Getenv("HCLOUDSCALE_CA_CHART")
	if dir == "" {
		t.Log("HCLOUDSCALE_CA_CHART is not set: the official chart is not rendered")
		return
	}
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "expander-values.yaml")
	if err := os.WriteFile(file, example, 0o600); err != nil {
		t.Fatal(err)
	}
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(exampleDir, "cluster-autoscaler-values.yaml"), file}})
	manifest, err := renderChart(t, ch, "cluster-autoscaler", releaseNamespace, vals)
	if err != nil {
		t.Fatalf("the official chart does not render with the example's values: %v", err)
	}
	for _, o := range find(decode(t, manifest), "ConfigMap") {
		if cm := typed(t, o).(*corev1.ConfigMap); cm.Name == "cluster-autoscaler-priority-expander" {
			if got := cm.Data["priorities"]; strings.TrimSpace(got) != strings.TrimSpace(want) {
				t.Errorf("the official chart's priority-expander ConfigMap holds:\n%s\nwant:\n%s", got, want)
			}
			return
		}
	}
	t.Error("the official chart renders no ConfigMap cluster-autoscaler-priority-expander with the example's values")
}

// TestOfferingTypoRefused: the chart's schema takes clusterConfig.json as
// any object, so an offering with a misspelt key renders; serve's
// configuration from the rendered pod refuses it, naming the key, so the
// pod never becomes Ready with it.
func TestOfferingTypoRefused(t *testing.T) {
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "config-pools-values.yaml")}})
	workers := lookup(vals, "clusterConfig", "json", "nodeConfigs", "workers").(map[string]any)
	workers["offerings"] = []any{map[string]any{"serverTyp": "cx33", "location": "nbg1"}}
	objs := mustRender(t, vals)
	_, err := loadRenderedConfig(t, objs, one[*appsv1.Deployment](t, objs, "Deployment"))
	if want := `nodeConfigs.workers.offerings[0].serverTyp: unknown key, did you mean "serverType"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve's configuration with a misspelt offering: %v; want %q", err, want)
	}
}
