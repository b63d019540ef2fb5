package chart

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// TestServeUnderChartRBAC runs one serve replica as the chart's pod would
// run it: the rendered arguments and environment (files at the rendered
// paths, moved under a temporary directory), as the chart's service
// account, whose rendered Role, RoleBinding, ClusterRole and
// ClusterRoleBinding are applied for real to the API server, against an
// in-memory Hetzner API. It must label a node of its pool, answer the
// kubelet's gRPC probe and an autoscaler's mutual-TLS call, stop cleanly
// on SIGTERM, and get no 403 from the API server. With leader election
// (a Lease of another name in another namespace than the defaults) it
// must also acquire that Lease and release it on SIGTERM. With the pools
// declared in the cluster config (no `nodes`), a pool added to the
// mounted file (swapped in as the kubelet does) must be served after the
// autoscaler's next Refresh, without a restart.
func TestServeUnderChartRBAC(t *testing.T) {
	t.Run("labeller, one replica", func(t *testing.T) {
		serveUnderChartRBAC(t, "serve-single", false, false)
	})
	t.Run("leader election and labeller", func(t *testing.T) {
		serveUnderChartRBAC(t, "serve-leader", true, false)
	})
	t.Run("pools in the cluster config, reloaded", func(t *testing.T) {
		serveUnderChartRBAC(t, "serve-config-pools", true, true)
	})
}

func serveUnderChartRBAC(t *testing.T, ns string, leader, configPools bool) {
	s := apiserver.Shared(t)
	const (
		podName  = "hcloudscale-5d9c7-abcde"
		poolName = "workers"
	)
	leaseNS, lease := ns+"-leases", ns+"-lock"
	set := []string{"leaderElection.enabled=false", "replicas=1"}
	wantRBAC := 3 // ServiceAccount, ClusterRole, ClusterRoleBinding
	if leader {
		set = []string{"leaderElection.leaseName=" + lease, "leaderElection.leaseNamespace=" + leaseNS}
		wantRBAC = 5
	}
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     set,
	})
	// Every server gets the pool's label, which a kubelet may not set.
	workers := map[string]any{"cloudInit": "#cloud-config\n", "labels": map[string]any{"node-role.kubernetes.io/worker": ""}}
	if configPools {
		delete(vals, "nodes")
		workers["minSize"], workers["maxSize"], workers["serverType"], workers["location"] = 0, 10, "cpx31", "fsn1"
	}
	vals["clusterConfig"] = map[string]any{"json": map[string]any{"nodeConfigs": map[string]any{poolName: workers}}}
	manifest, err := renderIn(t, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, manifest)
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetNamespace() != leaseNS {
			t.Fatalf("Role in %s; want the Lease's namespace %s", o.GetNamespace(), leaseNS)
		}
	}

	// The service account and its RBAC, for real; the namespaces first.
	if n := applyChartRBAC(t, s, objs, ns, leaseNS); n != wantRBAC {
		t.Fatalf("%d service account and RBAC objects among %q; want %d", n, kinds(objs), wantRBAC)
	}
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	kubeconfig := s.ServiceAccountKubeconfig(t, ns, pod.ServiceAccountName)
	user := serviceAccountUser(ns, pod.ServiceAccountName)

	// The Hetzner project: one running server of the pool, registered as
	// a node without the pool's label.
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))
	t.Cleanup(fake.Close)
	id, err := fake.AddServer(hcloudtest.ServerInfo{Name: ns + "-workers-1", ServerType: "cpx31", Location: "fsn1",
		Labels: map[string]string{config.LabelNodeGroup: poolName}})
	if err != nil {
		t.Fatal(err)
	}
	admin := s.AdminClient(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-workers-1"}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)}}
	if _, err := admin.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })

	// The pod's files: every volume mount of the container becomes a
	// directory with what the chart's Secrets, ConfigMaps and cert-manager
	// would put there.
	root := t.TempDir()
	c := pod.Containers[0]
	remap := podRemap(t, c, root)
	host := "hcloudscale." + ns + ".svc" // the Service's name, as the autoscaler dials it
	certs := writePodFiles(t, objs, pod, root, fake.Token(), host)

	// The rendered arguments, with loopback listeners and file paths under
	// root; $KUBECONFIG, the service account's, stands for the pod's
	// in-cluster credentials, for the Lease and the labeller.
	args, env := podProcess{Root: root, Kubeconfig: kubeconfig, Endpoint: fake.URL(), PodName: podName, Namespace: ns}.command(t, c)

	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--nodes") }) == configPools {
		t.Fatalf("serve %q: want --nodes only for pools in the values (configPools %v)", args, configPools)
	}

	proc := startServe(t, args, env)
	logs := proc.logs
	waitLog := func(msg string) map[string]any { t.Helper(); return proc.waitLog(t, msg) }
	serving := waitLog("serving")
	if leader {
		waitLog("leading: changes are let in")
		// It holds the Lease the values named.
		l, err := admin.CoordinationV1().Leases(leaseNS).Get(t.Context(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Lease %s/%s: %v", leaseNS, lease, err)
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != podName {
			t.Errorf("Lease holder %v; want %s", l.Spec.HolderIdentity, podName)
		}
	}
	// It is the writer: the Lease holder, or the only replica.
	if m := get(t, "http://"+serving["metrics_listen"].(string)+"/metrics"); !strings.Contains(m, "\nhcloudscale_leader 1\n") {
		t.Errorf("/metrics lacks hcloudscale_leader 1")
	}
	// The labeller labels the pool's node.
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := admin.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := n.Labels["node-role.kubernetes.io/worker"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s has labels %v; want node-role.kubernetes.io/worker from the pool; log:\n%s", n.Name, n.Labels, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The kubelet's probe: gRPC health in plaintext on the health port.
	checkGRPCHealth(t, serving["health_listen"].(string), "")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// The autoscaler: mutual TLS with the client certificate, the server
	// verified under the Service's name.
	gc, err := grpc.NewClient(serving["listen"].(string), grpc.WithTransportCredentials(credentials.NewTLS(certs.clientTLS(t, host))))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	groups, err := protos.NewCloudProviderClient(gc).NodeGroups(ctx, &protos.NodeGroupsRequest{})
	if err != nil || len(groups.GetNodeGroups()) != 1 || groups.GetNodeGroups()[0].GetId() != poolName {
		t.Errorf("NodeGroups over mutual TLS: %v, %v; want the pool %s", groups, err, poolName)
	}
	if configPools {
		// A pool added to the config: the Secret's update, as the kubelet
		// writes it into the volume, reaches the autoscaler at a Refresh.
		var cfgPath string
		for _, e := range c.Env {
			if e.Name == config.EnvClusterConfigFile {
				cfgPath = remap(e.Value)
			}
		}
		if cfgPath == "" {
			t.Fatalf("no %s in the container's environment", config.EnvClusterConfigFile)
		}
		arm := map[string]any{"minSize": 0, "maxSize": 3, "serverType": "cax31", "location": "nbg1", "cloudInit": "#cloud-config\n"}
		doc, err := json.Marshal(map[string]any{"nodeConfigs": map[string]any{poolName: workers, "arm": arm}})
		if err != nil {
			t.Fatal(err)
		}
		swapVolume(t, filepath.Dir(cfgPath), map[string][]byte{filepath.Base(cfgPath): doc})
		cp := protos.NewCloudProviderClient(gc)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := cp.Refresh(t.Context(), &protos.RefreshRequest{}); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			groups, err := cp.NodeGroups(t.Context(), &protos.NodeGroupsRequest{})
			if err != nil {
				t.Fatalf("NodeGroups: %v", err)
			}
			var ids []string
			for _, g := range groups.GetNodeGroups() {
				ids = append(ids, fmt.Sprintf("%s %d-%d", g.GetId(), g.GetMinSize(), g.GetMaxSize()))
			}
			slices.Sort(ids)
			if slices.Equal(ids, []string{"arm 0-3", poolName + " 0-10"}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node groups %q 30s after the config gained pool arm; want [arm 0-3 %s 0-10]; log:\n%s", ids, poolName, logs)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if m := get(t, "http://"+serving["metrics_listen"].(string)+"/metrics"); !strings.Contains(m, "\nhcloudscale_config_reload_success 1\n") {
			t.Errorf("/metrics lacks hcloudscale_config_reload_success 1 after the reload")
		}
	}

	// SIGTERM: a clean exit that releases the Lease.
	proc.terminate(t)
	if leader {
		l, err := admin.CoordinationV1().Leases(leaseNS).Get(t.Context(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h == podName {
			t.Errorf("Lease still held by %s after SIGTERM", podName)
		}
	}

	// What the service account did, and that nothing was refused.
	did := serviceAccountDid(t, s, user)
	want := []string{"list nodes ", "watch nodes ", "update nodes "}
	if leader {
		want = append(want, "create leases "+leaseNS, "get leases "+leaseNS, "update leases "+leaseNS)
	}
	for _, want := range want {
		if !did[want] {
			t.Errorf("the service account never did %q (did %q): the test did not exercise that permission", want, slices.Sorted(maps.Keys(did)))
		}
	}
}

// volumeFiles returns the files of the pod's Secret and ConfigMap volumes
// that the chart makes, as volume/name, with the token in place of the
// chart's Secret's.
func volumeFiles(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, token string) map[string][]byte {
	t.Helper()
	data := map[string]map[string][]byte{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Secret":
			s := typed(t, o).(*corev1.Secret)
			data["Secret/"+s.Name] = s.Data
		case "ConfigMap":
			cm := typed(t, o).(*corev1.ConfigMap)
			m := map[string][]byte{}
			for k, v := range cm.Data {
				m[k] = []byte(v)
			}
			data["ConfigMap/"+cm.Name] = m
		}
	}
	files := map[string][]byte{}
	for _, v := range pod.Volumes {
		var ref string
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			ref, items = "Secret/"+v.Secret.SecretName, v.Secret.Items
		case v.ConfigMap != nil:
			ref, items = "ConfigMap/"+v.ConfigMap.Name, v.ConfigMap.Items
		}
		content, ok := data[ref]
		if !ok {
			continue // cert-manager's; the test writes those
		}
		if len(items) == 0 {
			for k, b := range content {
				files[v.Name+"/"+k] = b
			}
		}
		for _, it := range items {
			b, ok := content[it.Key]
			if !ok {
				t.Fatalf("volume %s: %s has no key %s", v.Name, ref, it.Key)
			}
			files[v.Name+"/"+it.Path] = b
		}
	}
	// The minimal values' token stands for the fake project's.
	for name := range files {
		if strings.HasPrefix(name, "token/") {
			files[name] = []byte(token)
		}
	}
	return files
}

// inVolume returns where path of container c lies in the pod's volumes,
// as "<volume name>/<path in it>", the keys of volumeFiles.
func inVolume(c corev1.Container, path string) (string, bool) {
	for _, m := range c.VolumeMounts {
		if rest, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/"); ok {
			return m.Name + "/" + rest, true
		}
	}
	return "", false
}

// writeVolume writes files into dir as the kubelet writes a Secret or
// ConfigMap volume: into a timestamped directory that the symlink ..data
// points at, each file a symlink through ..data.
func writeVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	swapVolume(t, dir, files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// swapVolume replaces the files of a volume written by writeVolume as the
// kubelet's atomic writer does on an update: a new directory, a new
// symlink renamed over ..data, the old directory removed.
func swapVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	data, err := os.MkdirTemp(dir, "..data_")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(data, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(data), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeAcceptsRenderedArgs runs serve with the arguments the chart
// renders for every values file and the README's install: serve's flag
// checks pass (it fails later, at the configuration, for want of a
// token), where a bad flag would end it with usage exit code 2.
func TestServeAcceptsRenderedArgs(t *testing.T) {
	bin := buildServe(t)
	cases := readmeInstalls(t)
	for _, f := range valuesFiles(t) {
		cases[filepath.Base(f)] = values.Options{ValueFiles: []string{f}}
	}
	run := func(args []string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			dep := one[*appsv1.Deployment](t, mustRender(t, mergeValues(t, opts)), "Deployment")
			args := dep.Spec.Template.Spec.Containers[0].Args
			code, out := run(args)
			if code != 1 || !strings.Contains(out, "configuration") || strings.Contains(out, "--help") {
				t.Errorf("serve %q: exit code %d; want 1 at the configuration, after the flags passed; output:\n%s", args, code, out)
			}
			// The control: a flag serve refuses is a usage error.
			if code, out := run(append(slices.Clone(args), "--leader-elect-renew-deadline=1h")); code != 2 {
				t.Errorf("serve with a renew deadline above the lease duration: exit code %d; want 2; output:\n%s", code, out)
			}
		})
	}
}

var serveBinary struct {
	once sync.Once
	path string
	err  error
}

// buildServe builds cmd/hcloudscale once for the tests of this binary.
func buildServe(t *testing.T) string {
	t.Helper()
	serveBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "hcloudscale-bin-")
		if err != nil {
			serveBinary.err = err
			return
		}
		binDir = dir
		serveBinary.path = filepath.Join(dir, "hcloudscale")
		cmd := exec.Command("go", "build", "-o", serveBinary.path, "./cmd/hcloudscale")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			serveBinary.err = fmt.Errorf("go build ./cmd/hcloudscale: %w\n%s", err, out)
		}
	})
	if serveBinary.err != nil {
		t.Fatal(serveBinary.err)
	}
	return serveBinary.path
}

// lineLog collects serve's JSON log lines.
type lineLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// find returns the first log line with message msg.
func (l *lineLog) find(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testCerts is a CA with a server certificate for the Service's names and
// a client certificate, as the chart's cert-manager objects make them.
type testCerts struct {
	caPEM                 []byte
	serverCert, serverKey []byte
	client                tls.Certificate
	pool                  *x509.CertPool
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	serial                int64
}

// clientCertName is the DNS name of the chart's client Certificate.
func clientCertName(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, o := range find(objs, "Certificate") {
		if strings.HasSuffix(o.GetName(), "-client") {
			names, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
			if len(names) != 1 {
				t.Fatalf("%s dnsNames %q; want one", fmtObj(o), names)
			}
			return names[0]
		}
	}
	t.Fatal("no client Certificate")
	return ""
}

func newTestCerts(t *testing.T, serverName, clientName string) *testCerts {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCerts{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool(), ca: ca, caKey: caKey, serial: 1}
	c.pool.AddCert(ca)
	c.serverCert, c.serverKey = c.issue(t, serverName, []string{serverName}, x509.ExtKeyUsageServerAuth)
	cc, ck := c.issue(t, "cluster-autoscaler", []string{clientName}, x509.ExtKeyUsageClientAuth)
	if c.client, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	return c
}

// issue signs a certificate and its key (PEM) with the CA, valid for an
// hour.
func (c *testCerts) issue(t *testing.T, cn string, names []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.serial++
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.serial), Subject: pkix.Name{CommonName: cn}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// serverFiles are the keys of cert-manager's server Secret.
func (c *testCerts) serverFiles() map[string][]byte {
	return map[string][]byte{"tls.crt": c.serverCert, "tls.key": c.serverKey, "ca.crt": c.caPEM}
}

func (c *testCerts) clientTLS(t *testing.T, serverName string) *tls.Config {
	t.Helper()
	return &tls.Config{Certificates: []tls.Certificate{c.client}, RootCAs: c.pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
}
