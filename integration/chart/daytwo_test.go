package chart

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// minimal renders ci/minimal-values.yaml with set on top.
func minimal(t *testing.T, set ...string) (string, error) {
	t.Helper()
	return render(t, mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}, Values: set}))
}

func mustMinimal(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := minimal(t, set...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, manifest)
}

// TestDefaultsCannotDeadlock: with the default values a rollout never
// waits for a second node (soft anti-affinity, a surge before any old
// replica stops) and a drain never waits on a replica that is not ready.
func TestDefaultsCannotDeadlock(t *testing.T) {
	objs := mustMinimal(t)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 ||
		len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("affinity %+v; want only a preferred (soft) anti-affinity", a)
	}
	ru := dep.Spec.Strategy.RollingUpdate
	if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge.IntValue() != 1 || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy %+v; want RollingUpdate with maxSurge 1, maxUnavailable 0", dep.Spec.Strategy)
	}
	pdb := one[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("PDB unhealthyPodEvictionPolicy %v; want AlwaysAllow", p)
	}

	// Upstream's control-plane layout is the values file beside it.
	cp := decodeFile(t, "control-plane-values.yaml")
	cpod := one[*appsv1.Deployment](t, cp, "Deployment").Spec.Template.Spec
	if _, ok := cpod.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok || len(cpod.Tolerations) != 1 || cpod.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" {
		t.Errorf("control-plane values: nodeSelector %v, tolerations %v", cpod.NodeSelector, cpod.Tolerations)
	}
}

func decodeFile(t *testing.T, ciFile string) []*unstructured.Unstructured {
	t.Helper()
	return mustRender(t, mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", ciFile)}}))
}

// TestExclusiveValuesFailNamingBoth: two values of which the chart would
// use one fail the install naming both, and every problem is reported in
// one error.
func TestExclusiveValuesFailNamingBoth(t *testing.T) {
	cases := []struct {
		set  []string
		want string
	}{
		{[]string{"tls.serverSecret=s"}, "tls.serverSecret and tls.certManager.enabled are both set"},
		{[]string{"tls.clientSecret=c"}, "tls.clientSecret and tls.certManager.enabled are both set"},
		{[]string{"hcloud.existingSecret=tok"}, "hcloud.token and hcloud.existingSecret are both set"},
		{[]string{"clusterConfig.existingName=cc"}, "clusterConfig.json and clusterConfig.existingName are both set"},
		{[]string{"serve.rpcTimeout=5s"}, "serve.rpcTimeout (5s) must stay below autoscalerCloudConfig.grpcTimeout (5s)"},
		{[]string{"serve.rpcTimeout=1m30s", "autoscalerCloudConfig.grpcTimeout=90s"}, "serve.rpcTimeout (1m30s) must stay below"},
		{[]string{"autoscalerCloudConfig.grpcTimeout=3500ms"}, "serve.rpcTimeout (4s) must stay below autoscalerCloudConfig.grpcTimeout (3500ms)"},
		{[]string{"networkPolicy.enabled=true"}, "networkPolicy.clientPodSelector: empty"},
		{[]string{"autoscaler.namespace=ops"}, "autoscaler.namespace: a client certificate in another namespace needs tls.certManager.issuerRef of kind ClusterIssuer"},
	}
	var all []string
	for _, tc := range cases {
		_, err := minimal(t, tc.set...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %q: error %v; want one containing %q", tc.set, err, tc.want)
		}
		if !slices.Contains(tc.set, "serve.rpcTimeout=1m30s") && !strings.HasPrefix(tc.set[0], "autoscalerCloudConfig") {
			all = append(all, tc.set...)
		}
	}
	_, err := minimal(t, all...)
	for _, tc := range cases {
		if strings.Contains(tc.set[0], "rpcTimeout=1m30s") || strings.HasPrefix(tc.set[0], "autoscalerCloudConfig") {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("all at once: error %v; want it to contain %q too", err, tc.want)
		}
	}
	// The controls: below the timeout, and given certificates alone.
	for _, set := range [][]string{{"serve.rpcTimeout=4500ms"}, {"serve.rpcTimeout=1m", "autoscalerCloudConfig.grpcTimeout=1m0.5s"},
		{"tls.certManager.enabled=false", "tls.serverSecret=s", "tls.clientSecret=c"}} {
		if _, err := minimal(t, set...); err != nil {
			t.Errorf("--set %q: %v", set, err)
		}
	}
}

// TestCertManagerCRDsMissing: without cert-manager's CRDs the install
// says so, rather than failing at the first Certificate.
func TestCertManagerCRDsMissing(t *testing.T) {
	saved := withCRDAPIs
	withCRDAPIs = nil
	t.Cleanup(func() { withCRDAPIs = saved })
	if _, err := minimal(t); err == nil || !strings.Contains(err.Error(), "cert-manager's CRDs are not installed") {
		t.Errorf("error %v; want one saying cert-manager's CRDs are missing", err)
	}
	if _, err := minimal(t, "tls.certManager.enabled=false", "tls.serverSecret=s", "tls.clientSecret=c"); err != nil {
		t.Errorf("given certificates without cert-manager: %v", err)
	}
}

// TestImageDigest: image.digest pins the image and never reaches a label;
// a digest in image.tag is refused; the image repository is required.
func TestImageDigest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := mustMinimal(t, "image.tag=v1.2.3", "image.digest="+digest)
	c := one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0]
	if want := "registry.example.com/hcloudscale:v1.2.3@" + digest; c.Image != want {
		t.Errorf("image %q; want %q", c.Image, want)
	}
	for _, o := range objs {
		for k, v := range o.GetLabels() {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s label %s=%q: %v", fmtObj(o), k, v, errs)
			}
		}
		if v := o.GetLabels()["app.kubernetes.io/version"]; v != "v1.2.3" {
			t.Errorf("%s version label %q; want v1.2.3", fmtObj(o), v)
		}
	}
	if _, err := minimal(t, "image.tag=v1@"+digest); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("a digest in image.tag: error %v; want one naming image.tag", err)
	}
	if _, err := minimal(t, "image.repository="); err == nil || !strings.Contains(err.Error(), "image.repository is required") {
		t.Errorf("no image repository: error %v", err)
	}
}

// TestLongNamesCertificates: the longest release name helm takes (53
// characters; the full name is 63) and a 63-character full name, in a
// 63-character namespace, render no commonName (cert-manager refuses one
// beyond 64 bytes) and DNS names whose labels fit.
func TestLongNamesCertificates(t *testing.T) {
	ns := strings.Repeat("n", 63)
	for _, tc := range []struct{ name, fullname string }{{strings.Repeat("r", 53), ""}, {"short", strings.Repeat("f", 63)}} {
		vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}, Values: []string{"fullnameOverride=" + tc.fullname}})
		manifest, err := renderChart(t, loadChart(t), tc.name, ns, vals)
		if err != nil {
			t.Fatal(err)
		}
		checkCertificateNames(t, find(decode(t, manifest), "Certificate"))
	}
}

func checkCertificateNames(t *testing.T, certs []*unstructured.Unstructured) {
	t.Helper()
	if len(certs) == 0 {
		t.Fatal("no Certificate")
	}
	for _, o := range certs {
		if cn, ok, _ := unstructured.NestedString(o.Object, "spec", "commonName"); ok && len(cn) > 64 {
			t.Errorf("%s commonName %q: %d bytes, above cert-manager's 64", fmtObj(o), cn, len(cn))
		}
		names, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
		for _, n := range names {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Errorf("%s dnsName %q: %v", fmtObj(o), n, errs)
			}
		}
	}
}

// TestClientIdentity: serve requires the name the chart's client
// Certificate carries; tls.clientName sets it.
func TestClientIdentity(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "hcloudscale-autoscaler"},
		{[]string{"tls.clientName=autoscaler.ops"}, "autoscaler.ops"},
		{[]string{"tls.verifyClientName=false"}, ""},
	} {
		objs := mustMinimal(t, tc.set...)
		args := flags(one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args)
		if got := args["tls-client-name"]; tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{tc.want}) {
			t.Errorf("--set %q: --tls-client-name %q; want %q", tc.set, got, tc.want)
		}
		if name := clientCertName(t, objs); name != tc.want && tc.want != "" {
			t.Errorf("--set %q: client Certificate dnsNames [%s]; want [%s]", tc.set, name, tc.want)
		}
	}
}

// TestAutoscalerInAnotherNamespace: the client certificate and the
// cloud-config go where the autoscaler runs, and the NetworkPolicy admits
// its pods there only.
func TestAutoscalerInAnotherNamespace(t *testing.T) {
	objs := mustMinimal(t, "autoscaler.namespace=ops", "tls.certManager.issuerRef.name=shared", "tls.certManager.issuerRef.kind=ClusterIssuer",
		"networkPolicy.enabled=true", "networkPolicy.clientPodSelector.matchLabels.app=cluster-autoscaler")
	for _, o := range objs {
		want := releaseNamespace
		if o.GetName() == "hcloudscale-client" || o.GetName() == "hcloudscale-autoscaler-cloud-config" {
			want = "ops"
		}
		if o.GetNamespace() != want && o.GetNamespace() != "" {
			t.Errorf("%s; want namespace %s", fmtObj(o), want)
		}
	}
	np := one[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	peer := np.Spec.Ingress[0].From[0]
	if peer.PodSelector == nil || peer.PodSelector.MatchLabels["app"] != "cluster-autoscaler" ||
		peer.NamespaceSelector == nil || peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "ops" {
		t.Errorf("NetworkPolicy peer %+v; want the autoscaler's pods in ops", peer)
	}
}

// TestOfficialChartKnobs: the knobs the cluster-autoscaler chart has.
func TestOfficialChartKnobs(t *testing.T) {
	objs := mustMinimal(t, "rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=mine", "automountServiceAccountToken=false",
		"extraVolumes[0].name=extra", "extraVolumes[0].emptyDir.medium=Memory", "extraVolumeMounts[0].name=extra", "extraVolumeMounts[0].mountPath=/extra",
		"deployment.annotations.a=b", "revisionHistoryLimit=3", "additionalLabels.team=infra",
		"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.namespace=monitoring",
		"metrics.serviceMonitor.relabelings[0].targetLabel=cluster", "metrics.serviceMonitor.relabelings[0].replacement=prod", "gomaxprocs=3")
	for _, kind := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceAccount"} {
		if len(find(objs, kind)) != 0 {
			t.Errorf("a %s with rbac.create and serviceAccount.create false", kind)
		}
	}
	for _, o := range objs {
		if o.GetLabels()["team"] != "infra" {
			t.Errorf("%s lacks the additional label", fmtObj(o))
		}
	}
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != "mine" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken ||
		dep.Annotations["a"] != "b" || dep.Spec.RevisionHistoryLimit == nil || *dep.Spec.RevisionHistoryLimit != 3 || !mounted(pod, "/extra/x") {
		t.Errorf("deployment %s: service account %q, automount %v, annotations %v, revisionHistoryLimit %v, extra mount %v",
			dep.Name, pod.ServiceAccountName, pod.AutomountServiceAccountToken, dep.Annotations, dep.Spec.RevisionHistoryLimit, mounted(pod, "/extra/x"))
	}
	if env := envOf(pod.Containers[0]); env["GOMAXPROCS"] != "3" {
		t.Errorf("GOMAXPROCS %q; want 3", env["GOMAXPROCS"])
	}
	sm := find(objs, "ServiceMonitor")[0]
	rl, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if sm.GetNamespace() != "monitoring" || !strings.Contains(fmtObj(sm), "monitoring") || len(rl) != 1 || rl[0].(map[string]any)["relabelings"] == nil {
		t.Errorf("ServiceMonitor %s endpoints %v; want it in monitoring with the relabelings", fmtObj(sm), rl)
	}
	if ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Equal(ns, []string{releaseNamespace}) {
		t.Errorf("ServiceMonitor namespaceSelector %q; want the release namespace", ns)
	}
	if env := envOf(one[*appsv1.Deployment](t, mustMinimal(t), "Deployment").Spec.Template.Spec.Containers[0]); env["GOMAXPROCS"] == "" {
		t.Error("no GOMAXPROCS by default")
	}
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// TestValuesTable keeps the chart README's table of every value and its
// default what values.yaml says; -update writes it.
func TestValuesTable(t *testing.T) {
	var vals map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "values.yaml")), &vals); err != nil {
		t.Fatal(err)
	}
	var rows []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				key := k
				if strings.ContainsAny(k, "./") {
					key = strconv.Quote(k)
				}
				walk(strings.TrimPrefix(prefix+"."+key, "."), m[k])
			}
			return
		}
		def, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, fmt.Sprintf("| `%s` | `%s` |", prefix, strings.ReplaceAll(string(def), "|", `\|`)))
	}
	walk("", vals)
	table := "| Value | Default |\n|---|---|\n" + strings.Join(rows, "\n") + "\n"

	path := filepath.Join(chartDir, "README.md")
	readme := string(readFile(t, path))
	const start, end = "<!-- values table: generated by TestValuesTable -->\n", "<!-- end of the values table -->"
	i, j := strings.Index(readme, start), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q", path, start, end)
	}
	if got := readme[i+len(start) : j]; got != table {
		if *update {
			if err := os.WriteFile(path, []byte(readme[:i+len(start)]+table+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the values table of %s is not values.yaml's; run go test ./chart -run TestValuesTable -update", path)
	}
}
