package chart

import (
	"crypto/x509"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCABundleLookup installs the chart with a shared issuer on the real
// API server, plays cert-manager for the autoscaler's client certificate,
// and upgrades with the README's command to a tls.caBundle: serve's new
// pods would become ready with that bundle and refuse the autoscaler if
// it did not hold the CA of the client certificate the autoscaler holds
// (ca.crt of its Secret), so such an upgrade fails naming the ConfigMap,
// as does a ConfigMap that is missing or lacks the key; a bundle with that
// CA and another upgrades.
func TestCABundleLookup(t *testing.T) {
	const name, ns = "bundle", "lookup-bundle"
	s, cfg, rel := installSharedIssuer(t, name, ns, "internal-ca")
	objs := decode(t, rel.Manifest)
	clientName := clientCertName(t, objs)
	current, next, other := newTestCerts(t, "host", clientName), newTestCerts(t, "host", clientName), newTestCerts(t, "host", clientName)
	cert, key := current.issue(t, "", []string{clientName}, x509.ExtKeyUsageClientAuth)
	admin := s.AdminClient(t)
	putTLSSecret(t, admin, ns, name+"-hcloudscale-client-tls", cert, key, current.caPEM)

	put := func(data map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trust", Namespace: ns}, Data: data}
		if _, err := admin.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err == nil {
			return
		}
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	upgrade := func() error {
		t.Helper()
		up, opts := readmeUpgradeAction(t, cfg)
		up.Namespace, up.WaitStrategy = ns, kube.HookOnlyStrategy
		opts.Values = append(opts.Values, "tls.caBundle.configMap=trust")
		_, err := up.Run(name, loadChart(t), mergeValues(t, opts))
		return err
	}
	for _, tc := range []struct {
		name string
		data map[string]string // nil: no ConfigMap
		want string            // in the error; "" for none
	}{
		{"no ConfigMap", nil, `tls.caBundle.configMap: no ConfigMap "trust" in namespace lookup-bundle`},
		{"another key", map[string]string{"bundle.pem": string(current.caPEM)}, `tls.caBundle.configMap: ConfigMap "trust" has no key "ca.crt"`},
		{"other CAs only", map[string]string{"ca.crt": string(next.caPEM) + string(other.caPEM)},
			`tls.caBundle.configMap: ConfigMap "trust" (ca.crt) lacks the CA of the autoscaler's client certificate (ca.crt of Secret lookup-bundle/bundle-hcloudscale-client-tls)`},
		{"the current and the next CA", map[string]string{"ca.crt": string(next.caPEM) + string(current.caPEM)}, ""},
	} {
		if tc.data != nil {
			put(tc.data)
		}
		err := upgrade()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: upgrade: %v; want it to succeed", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: upgrade: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
}
