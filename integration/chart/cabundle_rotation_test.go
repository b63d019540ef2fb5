package chart

import (
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// TestCABundleRotation runs the pod the chart renders with an issuerRef
// and tls.caBundle as a process under the chart's RBAC, and walks the
// rotation of docs/deploy.md (certificate rotation) from the CA "old" to
// the CA "next" as the kubelet updates the volumes: the bundle holds
// both, the autoscaler (restarted once onto the bundle) calls with its
// client certificate of old, and cert-manager reissues serve's
// certificate from next. Every call on a new connection must be answered
// through the switch; an autoscaler that trusts old only is refused
// serve's new certificate (the switch really happened). Once the bundle
// holds next only, old's client certificate is refused and next's
// answered.
func TestCABundleRotation(t *testing.T) {
	s := apiserver.Shared(t)
	const ns = "ca-bundle-rotation"
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values: []string{"tls.certManager.issuerRef.name=internal-ca", "tls.certManager.issuerRef.kind=ClusterIssuer",
			"tls.clientName=autoscaler.example", "tls.caBundle.configMap=hcloudscale-ca", "leaderElection.enabled=false", "replicas=1"},
	})
	manifest, err := renderIn(t, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, manifest)
	applyChartRBAC(t, s, objs, ns)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pod := dep.Spec.Template.Spec
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))
	t.Cleanup(fake.Close)
	cfg, err := loadRenderedConfig(t, objs, dep)
	if err != nil {
		t.Fatal(err)
	}
	addProjectObjects(t, fake, cfg)

	host := one[*corev1.Service](t, objs, "Service").Name + "." + ns + ".svc"
	clientName := clientCertName(t, objs)
	old, next := newTestCerts(t, host, clientName), newTestCerts(t, host, clientName)
	oldCert, oldKey := old.issue(t, "", []string{clientName}, x509.ExtKeyUsageClientAuth)
	nextCert, nextKey := next.issue(t, "", []string{clientName}, x509.ExtKeyUsageClientAuth)
	root := t.TempDir()
	writePodVolumes(t, objs, pod, root, fake.Token(), old)
	bundleDir := filepath.Join(root, "ca-bundle")
	writeVolume(t, bundleDir, map[string][]byte{"ca.crt": append(append([]byte{}, old.caPEM...), next.caPEM...)})
	args, env := podProcess{Root: root, Kubeconfig: s.ServiceAccountKubeconfig(t, ns, pod.ServiceAccountName),
		Endpoint: fake.URL(), PodName: dep.Name + "-5d8f7-bundle", Namespace: ns}.command(t, pod.Containers[0])
	proc := startServe(t, args, env)
	addr, _ := proc.waitLog(t, "serving")["listen"].(string)

	bundle := x509.NewCertPool()
	bundle.AddCert(old.ca)
	bundle.AddCert(next.ca)
	call := func(step string, roots *x509.CertPool, cert, key []byte, want bool) {
		t.Helper()
		// Calls for a second: each on a new connection, a new handshake.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if err := callNodeGroups(t, addr, host, roots, cert, key); (err == nil) != want {
				t.Fatalf("%s: NodeGroups: %v; want answered: %v; log:\n%s", step, err, want, proc.logs)
			}
		}
	}
	call("before the switch", bundle, oldCert, oldKey, true)

	// cert-manager reissues serve's certificate from the new CA; the
	// kubelet swaps the server Secret's volume.
	swapVolume(t, filepath.Join(root, "tls"), next.serverFiles())
	deadline := time.Now().Add(30 * time.Second)
	for callNodeGroups(t, addr, host, old.pool, oldCert, oldKey) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("serve still presents a certificate of the old CA 30s after its Secret was reissued; log:\n%s", proc.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	call("after the switch, the autoscaler's old client certificate", bundle, oldCert, oldKey, true)
	call("after the switch, the autoscaler restarted with its new certificate", bundle, nextCert, nextKey, true)

	// The old CA leaves the bundle once the autoscaler restarted.
	swapVolume(t, bundleDir, map[string][]byte{"ca.crt": next.caPEM})
	deadline = time.Now().Add(30 * time.Second)
	for callNodeGroups(t, addr, host, bundle, oldCert, oldKey) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("serve still accepts the old CA's client certificate 30s after the bundle dropped it; log:\n%s", proc.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	call("the bundle with the new CA only", bundle, nextCert, nextKey, true)
	proc.terminate(t)
}
