package chart

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
// server with Helm's library, as its README said, under a release whose
// full name is not the old Lease name, plays cert-manager (the client
// Secret holds a certificate with only CN=cluster-autoscaler), and
// upgrades with this README's command twice, the second time with a value
// that rolls the pods. Each upgrade must keep the Lease the running pods
// hold and pin the autoscaler's old certificate (read from the cluster,
// then from the pins Secret once cert-manager reissued the client Secret).
// Each revision's pod runs as a process behind a forwarder that plays the
// Service, rolled as the Deployment rolls (the new pod serving before the
// old one stops), while the autoscaler, with its old certificate, calls
// all along: no call may fail. The last pod also takes the reissued
// certificate and refuses another certificate of the old name.
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
	if got := flags(one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args)["leader-elect-resource-name"]; len(got) != 1 || got[0] != "hcloudscale" {
		t.Fatalf("chart %s: --leader-elect-resource-name %q; want the first chart's hcloudscale", first.version, got)
	}
	svc := one[*corev1.Service](t, objs, "Service")
	host := svc.Name + "." + ns + ".svc"
	certs := newTestCerts(t, host, "unused")
	oldCert, oldKey := certs.issue(t, "cluster-autoscaler", nil, x509.ExtKeyUsageClientAuth)
	admin := s.AdminClient(t)
	clientSecret := svc.Name + "-client-tls"
	putTLSSecret(t, admin, ns, clientSecret, oldCert, oldKey, certs.caPEM)

	pods, svcAddr, pod, calls := serveRelease(t, s, ns, host, certs, objs, oldCert, oldKey)

	rel = helmUpgrade(t, cfg, name, ns)
	pod = pods.roll(t, svcAddr, pod, checkKept(t, s, rel, ns, oldCert), calls)
	// cert-manager reissues the client Secret for the Certificate the
	// upgrade changed; the autoscaler still holds the old one in memory.
	newCert, newKey := certs.issue(t, "", []string{clientCertName(t, decode(t, rel.Manifest))}, x509.ExtKeyUsageClientAuth)
	putTLSSecret(t, admin, ns, clientSecret, newCert, newKey, certs.caPEM)
	rel = helmUpgrade(t, cfg, name, ns, "serve.logLevel=debug")
	pod = pods.roll(t, svcAddr, pod, checkKept(t, s, rel, ns, oldCert), calls)
	calls.stop(t)

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
		err := callNodeGroups(t, pod.addr, host, certs.pool, tc.cert, tc.key)
		if tc.accepted != (err == nil) {
			t.Errorf("%s: NodeGroups: %v; want accepted: %v; log:\n%s", tc.name, err, tc.accepted, pod.proc.logs)
		}
	}
	pod.proc.terminate(t)
}

// serveRelease runs the pod of a release's objs behind a forwarder that
// plays its Service host, and the autoscaler calling it with cert and key,
// until it has answered 5 calls.
func serveRelease(t *testing.T, s *apiserver.Server, ns, host string, certs *testCerts, objs []*unstructured.Unstructured, cert, key []byte) (*podRunner, *forwarder, runningPod, *caller) {
	t.Helper()
	pods := &podRunner{s: s, ns: ns, certs: certs, fake: hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))}
	t.Cleanup(pods.fake.Close)
	svc := newForwarder(t)
	pod := pods.start(t, objs)
	svc.route(pod.addr)
	calls := startCalling(t, svc.addr(), host, certs.pool, cert, key)
	calls.waitMore(t, 5)
	return pods, svc, pod, calls
}

// podRunner runs the pods of a release's revisions as processes, one
// after the other, against one fake project.
type podRunner struct {
	s     *apiserver.Server
	ns    string
	certs *testCerts
	fake  *hcloudtest.Server
	n     int
}

// runningPod is a revision's pod serving at addr.
type runningPod struct {
	proc *serveProcess
	addr string
}

// start runs the Deployment's pod of objs with the server certificate of
// the runner's CA, the volumes under a directory of its own.
func (r *podRunner) start(t *testing.T, objs []*unstructured.Unstructured) runningPod {
	t.Helper()
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	if r.n == 0 {
		cc, err := loadRenderedConfig(t, objs, dep)
		if err != nil {
			t.Fatal(err)
		}
		addProjectObjects(t, r.fake, cc)
	}
	r.n++
	root := t.TempDir()
	pod := dep.Spec.Template.Spec
	writePodVolumes(t, objs, pod, root, r.fake.Token(), r.certs)
	args, env := podProcess{Root: root, Kubeconfig: r.s.ServiceAccountKubeconfig(t, r.ns, pod.ServiceAccountName), Endpoint: r.fake.URL(),
		PodName: fmt.Sprintf("%s-5d8f7-pod%d", dep.Name, r.n), Namespace: r.ns}.command(t, pod.Containers[0])
	proc := startServe(t, args, env)
	addr, _ := proc.waitLog(t, "serving")["listen"].(string)
	return runningPod{proc: proc, addr: addr}
}

// roll replaces old by the pod of objs as the Deployment's rolling update
// does (maxSurge 1, maxUnavailable 0): the new pod serves, the Service
// routes to both, the old pod stops and the Service routes to the new one
// only, which must then answer the calls.
func (r *podRunner) roll(t *testing.T, svc *forwarder, old runningPod, objs []*unstructured.Unstructured, calls *caller) runningPod {
	t.Helper()
	next := r.start(t, objs)
	svc.route(old.addr, next.addr)
	calls.waitMore(t, 3)
	// The endpoint of a terminating pod leaves the Service as it is
	// told to stop; its open connections stay until it closes them.
	svc.route(next.addr)
	old.proc.terminate(t)
	calls.waitMore(t, 5)
	checkNoHandshakeRefused(t, old)
	next.proc.waitLog(t, "leading: changes are let in")
	if m := get(t, "http://"+next.proc.logs.find("serving")["metrics_listen"].(string)+"/metrics"); !strings.Contains(m, "hcloudscale_externalgrpc_requests_total{") {
		t.Errorf("the new pod answered no call after the old one stopped; its metrics:\n%s", grepLines(m, "hcloudscale_tls_handshake_failures_total"))
	}
	checkNoHandshakeRefused(t, next)
	return next
}

// checkNoHandshakeRefused fails the test for every handshake pod refused,
// as its log says.
func checkNoHandshakeRefused(t *testing.T, pod runningPod) {
	t.Helper()
	if l := pod.proc.logs.find("TLS handshake refused"); l != nil {
		t.Errorf("a pod refused a handshake: %v", l)
	}
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
		t.Errorf("revision %d: the pins Secret: %v", rel.Version, err)
	} else if got := strings.TrimSpace(string(pins.Data["clients.pem"])); got != strings.TrimSpace(string(oldCert)) {
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
	const name, ns = "shared", "lookup-shared"
	s, cfg, rel := installSharedIssuer(t, name, ns, "shared")
	installed := sharedIssuerNames(t, s, rel, ns)
	if !strings.HasPrefix(installed.client, "shared-hcloudscale-autoscaler-") || len(installed.client) != len("shared-hcloudscale-autoscaler-")+22 {
		t.Fatalf("client name %q; want shared-hcloudscale-autoscaler- and 22 random characters", installed.client)
	}
	for _, set := range [][]string{nil, {"serve.logLevel=debug"}} {
		if got := sharedIssuerNames(t, s, helmUpgrade(t, cfg, name, ns, set...), ns); got != installed {
			t.Errorf("upgrade --set %q: client name and Lease %+v; want those of the install, %+v", set, got, installed)
		}
	}
}

// installSharedIssuer installs this chart's minimal values with the
// ClusterIssuer issuer as release name into ns on a real API server with
// cert-manager's CRDs.
func installSharedIssuer(t *testing.T, name, ns, issuer string) (*apiserver.Server, *action.Configuration, *releasev1.Release) {
	t.Helper()
	s := withCRDs(t)
	cfg := clusterHelm(t, s, ns)
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     []string{"tls.certManager.issuerRef.name=" + issuer, "tls.certManager.issuerRef.kind=ClusterIssuer"},
	})
	return s, cfg, helmInstall(t, cfg, loadChart(t), name, ns, vals)
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

// forwarder plays a Service: it forwards each connection to one of its
// backends, in turn.
type forwarder struct {
	ln net.Listener
	// mu guards backends and n.
	mu       sync.Mutex
	backends []string
	n        int
}

func newForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go f.serve()
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

// route sends new connections to addrs from now on.
func (f *forwarder) route(addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = addrs
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.pipe(c)
	}
}

func (f *forwarder) pipe(c net.Conn) {
	f.mu.Lock()
	backend := f.backends[f.n%len(f.backends)]
	f.n++
	f.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		_ = c.Close()
		return
	}
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{b, c}, {c, b}} {
		go func() { _, _ = io.Copy(p[0], p[1]); done <- struct{}{} }()
	}
	<-done
	_ = c.Close()
	_ = b.Close()
}

// caller is the autoscaler: one connection with its client certificate,
// a NodeGroups call every 100 ms, as grpc-go makes them by default (a
// call fails at once while the connection cannot be made).
type caller struct {
	conn *grpc.ClientConn
	// mu guards ok and failed.
	mu     sync.Mutex
	ok     int
	failed []error
	quit   chan struct{}
	done   chan struct{}
}

func startCalling(t *testing.T, addr, serverName string, roots *x509.CertPool, cert, key []byte) *caller {
	t.Helper()
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{conn: conn, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		client := protos.NewCloudProviderClient(conn)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.NodeGroups(ctx, &protos.NodeGroupsRequest{})
			cancel()
			c.mu.Lock()
			if err != nil {
				c.failed = append(c.failed, err)
			} else {
				c.ok++
			}
			c.mu.Unlock()
			select {
			case <-c.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { c.halt() })
	return c
}

// waitMore waits for n more answered calls.
func (c *caller) waitMore(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	want := c.ok + n
	c.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		c.mu.Lock()
		ok, failed := c.ok, c.failed
		c.mu.Unlock()
		if ok >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls answered of the %d awaited in a minute; %d failed, the last with: %v", ok-want+n, n, len(failed), failed[max(0, len(failed)-1):])
		}
	}
}

func (c *caller) halt() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
	_ = c.conn.Close()
}

// stop ends the calls and fails the test for every call that failed.
func (c *caller) stop(t *testing.T) {
	t.Helper()
	c.halt()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("%d calls answered, %d failed", c.ok, len(c.failed))
	for _, err := range c.failed {
		t.Errorf("a call of the autoscaler failed: %v", err)
	}
}
