package chart

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// clusterHelm is a Helm configuration that installs into the real API
// server s, its releases stored there in Secrets, as the helm CLI does.
func clusterHelm(t *testing.T, s *apiserver.Server, namespace string) *action.Configuration {
	t.Helper()
	rc := s.AdminConfig()
	dir := t.TempDir()
	ca, kubeconfig := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(ca, rc.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	// An empty kubeconfig of its own: nothing of the machine's applies.
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.APIServer, flags.BearerToken, flags.CAFile, flags.Namespace = &kubeconfig, &rc.Host, &rc.BearerToken, &ca, &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	cfg.Capabilities = testCapabilities(t)
	return cfg
}

// helmInstall installs ch as release name into namespace, without
// waiting for its pods (no kubelet runs them).
func helmInstall(t *testing.T, cfg *action.Configuration, ch *chartv2.Chart, name, namespace string, vals map[string]any) *releasev1.Release {
	t.Helper()
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = name, namespace, true
	install.WaitStrategy = kube.HookOnlyStrategy
	rel, err := install.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm install %s: %v", name, err)
	}
	return rel.(*releasev1.Release)
}

// helmUpgrade upgrades the release to this chart with the README's
// upgrade command as written, plus set.
func helmUpgrade(t *testing.T, cfg *action.Configuration, name, namespace string, set ...string) *releasev1.Release {
	t.Helper()
	up, opts := readmeUpgradeAction(t, cfg)
	up.Namespace, up.WaitStrategy = namespace, kube.HookOnlyStrategy
	opts.Values = append(opts.Values, set...)
	rel, err := up.Run(name, loadChart(t), mergeValues(t, opts))
	if err != nil {
		t.Fatalf("README's upgrade of %s: %v", name, err)
	}
	return rel.(*releasev1.Release)
}

// firstChart is the first chart in git history: its client certificate
// had only CN=cluster-autoscaler and its Lease was named hcloudscale.
func firstChart(t *testing.T) earlierChart {
	t.Helper()
	charts := earlierCharts(t, semver.MustParse(loadChart(t).Metadata.Version))
	return charts[len(charts)-1]
}

// TestUpgradeKeepsWhatLookupFinds installs the first chart on the real API
// server with Helm's library, as its README said, under a release name
// whose full name is not the old Lease name, plays cert-manager (the
// client Secret holds a certificate with only CN=cluster-autoscaler), and
// upgrades with this README's command twice, the second time with a value
// that rolls the pods. Each upgrade must keep the Lease the running pods
// hold, pin the autoscaler's old certificate (read from the cluster, then
// from the pins Secret once cert-manager reissued the client Secret), and
// serve, run as the upgraded pod, must accept the autoscaler's old
// certificate and refuse another certificate with the same old name.
func TestUpgradeKeepsWhatLookupFinds(t *testing.T) {
	s := withCRDs(t)
	const name, ns = "autoscaling", "lookup-first"
	first := firstChart(t)
	cfg := clusterHelm(t, s, ns)
	// The first README left out the network its example config's
	// defaultSubnetIPRange needs, which serve refuses; later READMEs set it.
	install := first.install
	install.Values = append(install.Values, "hcloud.network=k8s")
	rel := helmInstall(t, cfg, first.chart, name, ns, mergeValues(t, install))
	objs := decode(t, rel.Manifest)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	if got := flags(dep.Spec.Template.Spec.Containers[0].Args)["leader-elect-resource-name"]; len(got) != 1 || got[0] != "hcloudscale" {
		t.Fatalf("chart %s: --leader-elect-resource-name %q; want the first chart's hcloudscale", first.version, got)
	}
	svc := one[*corev1.Service](t, objs, "Service")
	host := svc.Name + "." + ns + ".svc"
	certs := newTestCerts(t, host, "unused")
	oldCert, oldKey := certs.issue(t, "cluster-autoscaler", nil, x509.ExtKeyUsageClientAuth)
	admin := s.AdminClient(t)
	clientSecret := svc.Name + "-client-tls"
	putTLSSecret(t, admin, ns, clientSecret, oldCert, oldKey, certs.caPEM)

	rel = helmUpgrade(t, cfg, name, ns)
	checkKept(t, s, rel, ns, oldCert)
	// cert-manager reissues the client Secret for the Certificate the
	// upgrade changed; the autoscaler still holds the old one in memory.
	newName := clientCertName(t, decode(t, rel.Manifest))
	newCert, newKey := certs.issue(t, "", []string{newName}, x509.ExtKeyUsageClientAuth)
	putTLSSecret(t, admin, ns, clientSecret, newCert, newKey, certs.caPEM)
	rel = helmUpgrade(t, cfg, name, ns, "serve.logLevel=debug")
	objs = checkKept(t, s, rel, ns, oldCert)

	// The upgraded pod, run as a process: the autoscaler's old
	// certificate is let in, the new one too, and another certificate
	// of the old name is refused.
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))
	t.Cleanup(fake.Close)
	dep = one[*appsv1.Deployment](t, objs, "Deployment")
	cc, err := loadRenderedConfig(t, objs, dep)
	if err != nil {
		t.Fatal(err)
	}
	addProjectObjects(t, fake, cc)
	root := t.TempDir()
	pod := dep.Spec.Template.Spec
	writePodVolumes(t, objs, pod, root, fake.Token(), certs)
	args, env := podProcess{Root: root, Kubeconfig: s.ServiceAccountKubeconfig(t, ns, pod.ServiceAccountName), Endpoint: fake.URL(),
		PodName: "autoscaling-hcloudscale-5d8f7-q2x9k", Namespace: ns}.command(t, pod.Containers[0])
	proc := startServe(t, args, env)
	addr, _ := proc.waitLog(t, "serving")["listen"].(string)
	strangerCert, strangerKey := certs.issue(t, "cluster-autoscaler", nil, x509.ExtKeyUsageClientAuth)
	for _, tc := range []struct {
		name      string
		cert, key []byte
		accepted  bool
	}{
		{"the autoscaler's old certificate", oldCert, oldKey, true},
		{"the reissued certificate", newCert, newKey, true},
		{"another certificate of the old name", strangerCert, strangerKey, false},
	} {
		err := callNodeGroups(t, addr, host, certs.pool, tc.cert, tc.key)
		if tc.accepted != (err == nil) {
			t.Errorf("%s: NodeGroups: %v; want accepted: %v; log:\n%s", tc.name, err, tc.accepted, proc.logs)
		}
	}
	proc.terminate(t)
}

// checkKept checks a release upgraded from the first chart and returns
// its objects: the Lease is the one the first chart's pods hold, and the
// autoscaler's old certificate is pinned and mounted.
func checkKept(t *testing.T, s *apiserver.Server, rel *releasev1.Release, ns string, oldCert []byte) []*unstructured.Unstructured {
	t.Helper()
	objs := decode(t, rel.Manifest)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	args := flags(dep.Spec.Template.Spec.Containers[0].Args)
	if got := args["leader-elect-resource-name"]; len(got) != 1 || got[0] != "hcloudscale" {
		t.Errorf("revision %d: --leader-elect-resource-name %q; want the installed release's hcloudscale", rel.Version, got)
	}
	if len(args["tls-client-pinned"]) != 1 {
		t.Errorf("revision %d: no --tls-client-pinned in %q", rel.Version, dep.Spec.Template.Spec.Containers[0].Args)
	}
	pins, err := s.AdminClient(t).CoreV1().Secrets(ns).Get(t.Context(), dep.Name+"-pinned-clients", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("revision %d: the pins Secret: %v", rel.Version, err)
	}
	if got := strings.TrimSpace(string(pins.Data["clients.pem"])); got != strings.TrimSpace(string(oldCert)) {
		t.Errorf("revision %d: pinned %q; want exactly the autoscaler's old certificate", rel.Version, got)
	}
	return objs
}

// putTLSSecret writes a Secret as cert-manager does for a Certificate.
func putTLSSecret(t *testing.T, c kubernetes.Interface, ns, name string, cert, key, ca []byte) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}}
	if _, err := c.CoreV1().Secrets(ns).Update(t.Context(), secret, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := c.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// callNodeGroups makes the autoscaler's NodeGroups call over mutual TLS
// with the client certificate given.
func callNodeGroups(t *testing.T, addr, serverName string, roots *x509.CertPool, cert, key []byte) error {
	t.Helper()
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = protos.NewCloudProviderClient(conn).NodeGroups(ctx, &protos.NodeGroupsRequest{})
	return err
}

// TestUpgradeKeepsTheSharedIssuerClientName installs this chart with a
// shared ClusterIssuer on the real API server, with Helm's library, and
// upgrades it with the README's command twice (the second time with a
// value that rolls the pods): the random client name made at the install
// is read back from its Secret on every upgrade, so the client
// Certificate, serve's --tls-client-name and the Secret keep it, and the
// Lease keeps the installed release's name.
func TestUpgradeKeepsTheSharedIssuerClientName(t *testing.T) {
	s := withCRDs(t)
	const name, ns = "shared", "lookup-shared"
	cfg := clusterHelm(t, s, ns)
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     []string{"tls.certManager.issuerRef.name=shared", "tls.certManager.issuerRef.kind=ClusterIssuer"},
	})
	installed := sharedIssuerNames(t, s, helmInstall(t, cfg, loadChart(t), name, ns, vals), ns)
	if !strings.HasPrefix(installed.client, "shared-hcloudscale-autoscaler-") || len(installed.client) != len("shared-hcloudscale-autoscaler-")+22 {
		t.Fatalf("client name %q; want shared-hcloudscale-autoscaler- and 22 random characters", installed.client)
	}
	for _, set := range [][]string{nil, {"serve.logLevel=debug"}} {
		if got := sharedIssuerNames(t, s, helmUpgrade(t, cfg, name, ns, set...), ns); got != installed {
			t.Errorf("upgrade --set %q: client name and Lease %+v; want those of the install, %+v", set, got, installed)
		}
	}
}

// keptNames are what an upgrade must keep of an installed release.
type keptNames struct{ client, lease string }

// sharedIssuerNames returns the client name of a release with a shared
// issuer and its Lease, checking that the client Certificate, serve's
// --tls-client-name and the Secret in the cluster agree on it.
func sharedIssuerNames(t *testing.T, s *apiserver.Server, rel *releasev1.Release, ns string) keptNames {
	t.Helper()
	objs := decode(t, rel.Manifest)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	args := flags(dep.Spec.Template.Spec.Containers[0].Args)
	name := clientCertName(t, objs)
	secret, err := s.AdminClient(t).CoreV1().Secrets(ns).Get(t.Context(), dep.Name+"-client-name", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("revision %d: the client name's Secret: %v", rel.Version, err)
	}
	if kept := string(secret.Data["name"]); kept != name || len(args["tls-client-name"]) != 1 || args["tls-client-name"][0] != name {
		t.Errorf("revision %d: the client Certificate names %q, serve accepts %q, the Secret keeps %q", rel.Version, name, args["tls-client-name"], kept)
	}
	lease := args["leader-elect-resource-name"]
	if len(lease) != 1 {
		t.Fatalf("revision %d: --leader-elect-resource-name %q", rel.Version, lease)
	}
	return keptNames{client: name, lease: lease[0]}
}
