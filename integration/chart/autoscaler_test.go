package chart

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// officialChartKeys are the top-level values of the official
// cluster-autoscaler chart that cluster-autoscaler-values.yaml uses, as
// that chart documents them (its README's Values table).
var officialChartKeys = []string{
	"autoDiscovery", "cloudProvider", "containerSecurityContext", "deployment", "extraArgs", "extraVolumeMounts",
	"extraVolumeSecrets", "extraVolumes", "image", "priorityClassName", "resources", "securityContext",
}

// cloudConfig is the autoscaler's externalgrpc cloud-config.
type cloudConfig struct {
	Address     string `json:"address"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CACert      string `json:"cacert"`
	GRPCTimeout string `json:"grpc_timeout"`
}

// autoscalerSide renders the chart as the README installs it and returns
// the cloud-config ConfigMap's name and content, the client certificate's
// Secret, and the checks that the address reaches the Service under a
// name of the server certificate.
func autoscalerSide(t *testing.T) (cmName string, cc cloudConfig, clientSecret string) {
	t.Helper()
	objs := mustRender(t, mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}}))
	var cm *corev1.ConfigMap
	for _, o := range find(objs, "ConfigMap") {
		if c := typed(t, o).(*corev1.ConfigMap); c.Data["cloud-config.yaml"] != "" {
			cm = c
		}
	}
	if cm == nil {
		t.Fatalf("no ConfigMap with cloud-config.yaml among %q", kinds(objs))
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["cloud-config.yaml"]), &cc); err != nil {
		t.Fatalf("cloud-config.yaml: %v", err)
	}
	host, port, err := net.SplitHostPort(cc.Address)
	if err != nil {
		t.Fatalf("address %q: %v", cc.Address, err)
	}
	svc := one[*corev1.Service](t, objs, "Service")
	if host != svc.Name+"."+svc.Namespace+".svc" {
		t.Errorf("address host %s; want the Service %s/%s", host, svc.Namespace, svc.Name)
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" && port == strconv.Itoa(int(p.Port)) {
			found = true
		}
	}
	if !found {
		t.Errorf("address port %s is not the Service's grpc port %+v", port, svc.Spec.Ports)
	}
	if d, err := time.ParseDuration(cc.GRPCTimeout); err != nil || d <= 4*time.Second {
		t.Errorf("grpc_timeout %q; want a duration above serve's --rpc-timeout (4s)", cc.GRPCTimeout)
	}
	for _, cert := range find(objs, "Certificate") {
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
		names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		switch {
		case slices.Contains(usages, "client auth"):
			clientSecret = secret
		case slices.Contains(usages, "server auth") && !slices.Contains(names, host):
			t.Errorf("server certificate names %q lack the address host %s, which the autoscaler verifies", names, host)
		}
	}
	if clientSecret == "" {
		t.Fatal("no client certificate")
	}
	dir := path.Dir(cc.Cert)
	if path.Dir(cc.Key) != dir || path.Dir(cc.CACert) != dir || path.Base(cc.Cert) != "tls.crt" || path.Base(cc.Key) != "tls.key" || path.Base(cc.CACert) != "ca.crt" {
		t.Errorf("cloud-config cert %s, key %s, cacert %s; want the keys of one mounted cert-manager Secret", cc.Cert, cc.Key, cc.CACert)
	}
	return cm.Name, cc, clientSecret
}

// TestAutoscalerChartValues checks cluster-autoscaler-values.yaml, the
// values of the official chart, against what this chart renders: the
// externalgrpc provider, the cloud-config ConfigMap mounted where
// --cloud-config points, the client certificate's Secret mounted where
// the cloud-config says, and only values that chart has.
func TestAutoscalerChartValues(t *testing.T) {
	cmName, cc, clientSecret := autoscalerSide(t)
	var v struct {
		CloudProvider string `json:"cloudProvider"`
		AutoDiscovery struct {
			ClusterName string `json:"clusterName"`
		} `json:"autoDiscovery"`
		ExtraArgs          map[string]any       `json:"extraArgs"`
		ExtraVolumes       []corev1.Volume      `json:"extraVolumes"`
		ExtraVolumeMounts  []corev1.VolumeMount `json:"extraVolumeMounts"`
		ExtraVolumeSecrets map[string]struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"extraVolumeSecrets"`
	}
	raw := readFile(t, filepath.Join(exampleDir, "cluster-autoscaler-values.yaml"))
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		if !slices.Contains(officialChartKeys, k) {
			t.Errorf("value %s is not one of the official chart's %q", k, officialChartKeys)
		}
	}
	if v.CloudProvider != "externalgrpc" {
		t.Errorf("cloudProvider %q; want externalgrpc", v.CloudProvider)
	}
	if v.AutoDiscovery.ClusterName == "" {
		t.Error("autoDiscovery.clusterName is empty: the official chart then renders no Deployment")
	}
	configPath, _ := v.ExtraArgs["cloud-config"].(string)
	var cmMount string
	for _, vol := range v.ExtraVolumes {
		if vol.ConfigMap != nil && vol.ConfigMap.Name == cmName {
			for _, m := range v.ExtraVolumeMounts {
				if m.Name == vol.Name {
					cmMount = m.MountPath
				}
			}
		}
	}
	if cmMount == "" || configPath != path.Join(cmMount, "cloud-config.yaml") {
		t.Errorf("extraArgs.cloud-config %q, ConfigMap %s mounted at %q; want the ConfigMap's cloud-config.yaml", configPath, cmName, cmMount)
	}
	var secretMount string
	for key, s := range v.ExtraVolumeSecrets {
		name := s.Name
		if name == "" {
			name = key
		}
		if name == clientSecret {
			secretMount = s.MountPath
		}
	}
	if secretMount != path.Dir(cc.Cert) {
		t.Errorf("client certificate Secret %s mounted at %q; the cloud-config reads it from %s", clientSecret, secretMount, path.Dir(cc.Cert))
	}
}

// TestRawAutoscalerManifest checks examples/externalgrpc/
// cluster-autoscaler.yaml the same way: it mounts the chart's
// cloud-config and client certificate where they are read.
func TestRawAutoscalerManifest(t *testing.T) {
	objs := decode(t, string(readFile(t, filepath.Join(exampleDir, "cluster-autoscaler.yaml"))))
	checkAutoscalerDeployment(t, one[*appsv1.Deployment](t, objs, "Deployment"))
}

// TestOfficialAutoscalerChart renders the official cluster-autoscaler
// chart with cluster-autoscaler-values.yaml, as the README installs it,
// and checks its Deployment as the raw manifest's, and the pod labels
// that networkPolicy.clientPodSelector in the README selects. The module
// proxy does not serve that chart: HCLOUDSCALE_CA_CHART names a checkout
// of it (kubernetes/autoscaler's cluster-autoscaler/charts/
// cluster-autoscaler); without it the test is skipped.
func TestOfficialAutoscalerChart(t *testing.T) {
	dir := os.Getenv("HCLOUDSCALE_CA_CHART")
	if dir == "" {
		t.Skip("HCLOUDSCALE_CA_CHART is not set: no checkout of the official cluster-autoscaler chart")
	}
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart %s %s (appVersion %s)", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	vals := mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(exampleDir, "cluster-autoscaler-values.yaml")}})
	manifest, err := renderChart(t, ch, "cluster-autoscaler", releaseNamespace, vals)
	if err != nil {
		t.Fatalf("the official chart does not render with cluster-autoscaler-values.yaml: %v", err)
	}
	dep := one[*appsv1.Deployment](t, decode(t, manifest), "Deployment")
	checkAutoscalerDeployment(t, dep)
	if got := dep.Spec.Template.Labels["app.kubernetes.io/name"]; got != "externalgrpc-cluster-autoscaler" {
		t.Errorf("pod label app.kubernetes.io/name %q; the README's networkPolicy.clientPodSelector selects externalgrpc-cluster-autoscaler", got)
	}
}

// checkAutoscalerDeployment checks an autoscaler's Deployment: the
// externalgrpc provider, one --cloud-config, at the chart's cloud-config
// ConfigMap mounted there, and the client certificate's Secret mounted
// where the cloud-config reads it.
func checkAutoscalerDeployment(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	cmName, cc, clientSecret := autoscalerSide(t)
	c := dep.Spec.Template.Spec.Containers[0]
	args := append(slices.Clone(c.Command), c.Args...)
	var configPaths []string
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, "--cloud-config="); ok {
			configPaths = append(configPaths, p)
		}
	}
	if !slices.Contains(args, "--cloud-provider=externalgrpc") {
		t.Errorf("arguments %q lack --cloud-provider=externalgrpc", args)
	}
	if len(configPaths) != 1 {
		t.Fatalf("--cloud-config %q in %q; want one", configPaths, args)
	}
	configPath := configPaths[0]
	mountOf := func(pred func(corev1.Volume) bool) string {
		for _, vol := range dep.Spec.Template.Spec.Volumes {
			if pred(vol) {
				for _, m := range c.VolumeMounts {
					if m.Name == vol.Name {
						return m.MountPath
					}
				}
			}
		}
		return ""
	}
	if m := mountOf(func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == cmName }); m == "" || configPath != path.Join(m, "cloud-config.yaml") {
		t.Errorf("--cloud-config %q, ConfigMap %s mounted at %q; want the chart's cloud-config.yaml", configPath, cmName, m)
	}
	if m := mountOf(func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == clientSecret }); m != path.Dir(cc.Cert) {
		t.Errorf("client certificate Secret %s mounted at %q; the cloud-config reads it from %s", clientSecret, m, path.Dir(cc.Cert))
	}
}
