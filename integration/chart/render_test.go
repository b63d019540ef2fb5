package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../../charts/hcloudscale"
	// The release of the README's install command and of the examples.
	releaseName      = "hcloudscale"
	releaseNamespace = "kube-system"
	// The Kubernetes version the chart is rendered for: that of the API
	// server the integration tests run.
	kubeVersion = "v1.37.2"
)

// loadChart loads charts/hcloudscale from its directory.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading %s: %v", chartDir, err)
	}
	return ch
}

// mergeValues merges values as helm's -f, --set and --set-file do.
func mergeValues(t *testing.T, opts values.Options) map[string]any {
	t.Helper()
	vals, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		t.Fatalf("values %+v: %v", opts, err)
	}
	return vals
}

// render renders the chart as `helm template` (an install with a
// client-side dry run) does, into the release namespace.
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	return renderIn(t, releaseNamespace, vals)
}

func renderIn(t *testing.T, namespace string, vals map[string]any) (string, error) {
	t.Helper()
	return renderChart(t, loadChart(t), releaseName, namespace, vals)
}

// withCRDAPIs are the API versions of the CRDs the chart's objects use.
var withCRDAPIs = []string{"cert-manager.io/v1", "cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer",
	"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// renderChart renders any chart as release name in namespace.
func renderChart(t *testing.T, ch *chartv2.Chart, name, namespace string, vals map[string]any) (string, error) {
	t.Helper()
	// The CRDs of cert-manager and prometheus-operator, as on a cluster
	// that has them (the chart refuses cert-manager certificates without).
	return renderWithAPIs(t, ch, name, namespace, vals, withCRDAPIs)
}

// renderWithAPIs renders as `helm template --api-versions` does with
// apiVersions.
func renderWithAPIs(t *testing.T, ch *chartv2.Chart, name, namespace string, vals map[string]any, apiVersions []string) (string, error) {
	t.Helper()
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = name
	install.Namespace = namespace
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	install.APIVersions = apiVersions
	rel, err := install.Run(ch, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		t.Fatalf("install returned a %T", rel)
	}
	return r.Manifest, nil
}

// mustRender renders vals and fails the test on an error.
func mustRender(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return decode(t, manifest)
}

// decode splits a rendered manifest into its objects.
func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the manifest: %v", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if err := obj.UnmarshalJSON(j); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		out = append(out, obj)
	}
	return out
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// strictDecoder decodes the built-in kinds and refuses unknown fields,
// the check the API server makes of a typo in a template.
var strictDecoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: false, Strict: true})

// typed decodes a built-in object into its Go type, strictly.
func typed(t *testing.T, u *unstructured.Unstructured) runtime.Object {
	t.Helper()
	j, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := strictDecoder.Decode(j, nil, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return obj
}

// builtIn reports whether the scheme of client-go knows the object's kind.
func builtIn(u *unstructured.Unstructured) bool {
	return scheme.Scheme.Recognizes(u.GroupVersionKind())
}

// find returns the objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of a kind, decoded into T.
func one[T runtime.Object](t *testing.T, objs []*unstructured.Unstructured, kind string) T {
	t.Helper()
	found := find(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s; want 1", len(found), kind)
	}
	obj, ok := typed(t, found[0]).(T)
	if !ok {
		t.Fatalf("%s decodes to %T", kind, typed(t, found[0]))
	}
	return obj
}

// kinds lists "Kind/name" of every object.
func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// valuesFiles are the example values files: the chart's ci/ directory and
// those of examples/.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../examples/externalgrpc/hcloudscale-values.yaml")
	if len(files) < 4 {
		t.Fatalf("example values files %q; want the chart's ci/ files and the example's", files)
	}
	return files
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fmtObj(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}
