package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/cli/values"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

func TestMain(m *testing.M) {
	code := apiserver.Main(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binDir holds the serve binary the tests build, removed after them.
var binDir string

// crdKinds are the kinds of the CRDs in testdata/crds, by group version.
var crdKinds = map[string][]string{
	"cert-manager.io/v1":       {"certificates", "issuers"},
	"monitoring.coreos.com/v1": {"prometheusrules", "servicemonitors"},
}

// withCRDs returns the shared API server with the cert-manager and
// prometheus-operator CRDs of testdata/crds installed and served.
func withCRDs(t *testing.T) *apiserver.Server {
	t.Helper()
	s := apiserver.Shared(t)
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(files) != 4 {
		t.Fatalf("testdata/crds: %q, %v; want the four CRDs", files, err)
	}
	for _, f := range files {
		s.Apply(t, readFile(t, f))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for gv, want := range crdKinds {
		for {
			var served []string
			if list, err := dc.ServerResourcesForGroupVersion(gv); err == nil {
				for _, r := range list.APIResources {
					served = append(served, r.Name)
				}
			}
			if !slices.ContainsFunc(want, func(r string) bool { return !slices.Contains(served, r) }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s serves %q; want %q", gv, served, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return s
}

// TestServerSideDryRun applies every object the chart renders, for every
// example values file and the README's install, with a server-side dry
// run to a real kube-apiserver: its validation (and the CRDs' schemas for
// the cert-manager and prometheus-operator objects), defaulting and
// admission accept them all.
func TestServerSideDryRun(t *testing.T) {
	s := withCRDs(t)
	// The namespaces the values name; the objects go into them.
	s.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: scaler-leases\n"))

	cases := readmeInstalls(t)
	for _, f := range valuesFiles(t) {
		cases[filepath.Base(f)] = values.Options{ValueFiles: []string{f}}
	}
	// Every optional object, once.
	cases["minimal with monitoring and network policy"] = values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values: []string{"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true",
			"networkPolicy.enabled=true", "networkPolicy.clientPodSelector.matchLabels.app=cluster-autoscaler"},
	}
	// The knobs of the official cluster-autoscaler chart, and an
	// autoscaler in another namespace.
	cases["minimal with every knob"] = values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.namespace=scaler-leases",
			"metrics.serviceMonitor.relabelings[0].targetLabel=cluster", "metrics.serviceMonitor.relabelings[0].replacement=prod",
			"additionalLabels.team=infra", "deployment.annotations.a=b", "revisionHistoryLimit=3", "image.digest=sha256:" + strings.Repeat("0", 64),
			"extraVolumes[0].name=extra", "extraVolumes[0].emptyDir.medium=Memory", "extraVolumeMounts[0].name=extra", "extraVolumeMounts[0].mountPath=/extra",
			"autoscaler.namespace=scaler-leases", "tls.certManager.issuerRef.name=shared", "tls.certManager.issuerRef.kind=ClusterIssuer",
			"networkPolicy.enabled=true", "networkPolicy.clientPodSelector.matchLabels.app=cluster-autoscaler"},
	}
	applied := map[string]bool{}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			manifest, err := render(t, mergeValues(t, opts))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range decode(t, manifest) {
				applied[o.GetKind()] = true
			}
			s.Apply(t, []byte(manifest), apiserver.DryRun())
		})
	}
	// The longest names: a 53-character release (helm's limit) in a
	// 63-character namespace.
	t.Run("long names", func(t *testing.T) {
		ns := strings.Repeat("n", 63)
		s.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"))
		manifest, err := renderChart(t, loadChart(t), strings.Repeat("r", 53), ns,
			mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}}))
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(t, []byte(manifest), apiserver.DryRun())
	})
	for _, kind := range []string{"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
		"PodDisruptionBudget", "NetworkPolicy", "ConfigMap", "Secret", "Issuer", "Certificate", "ServiceMonitor", "PrometheusRule"} {
		if !applied[kind] {
			t.Errorf("no case renders a %s", kind)
		}
	}

	// The dry run does check: a misspelt field of a CRD's object, and a
	// Deployment field of the wrong type, are refused.
	for _, tc := range []struct{ name, from, to, want string }{
		{"ServiceMonitor", "      path: /metrics", "      pathh: /metrics", "pathh"},
		{"Certificate", "  usages: [server auth,", "  usages: [server-auth,", "server-auth"},
		{"Deployment", "      terminationGracePeriodSeconds: 160", "      terminationGracePeriodSeconds: soon", "terminationGracePeriodSeconds"},
	} {
		manifest, err := render(t, mergeValues(t, cases["minimal with monitoring and network policy"]))
		if err != nil {
			t.Fatal(err)
		}
		var broken []string
		for doc := range strings.SplitSeq(manifest, "\n---\n") {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err == nil && meta.Kind == tc.name && strings.Contains(doc, tc.from) {
				broken = append(broken, strings.Replace(doc, tc.from, tc.to, 1))
			}
		}
		if len(broken) == 0 {
			t.Fatalf("no %s with %q to break", tc.name, tc.from)
		}
		err = s.TryApply(t.Context(), []byte(strings.Join(broken, "\n---\n")), apiserver.DryRun())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %q: dry run error %v; want one naming %s", tc.name, tc.to, err, tc.want)
		}
	}
}
