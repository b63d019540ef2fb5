package chart

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// caCertificate is the spec of the chart's private CA, the cert-manager
// Certificate with isCA; nil when objs has none (issuerRef, no
// cert-manager).
func caCertificate(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	var out map[string]any
	for _, c := range find(objs, "Certificate") {
		spec, _ := c.Object["spec"].(map[string]any)
		if isCA, _ := spec["isCA"].(bool); !isCA {
			continue
		}
		if out != nil {
			t.Fatalf("two CA Certificates among %q", kinds(objs))
		}
		out = spec
	}
	return out
}

// rotationPolicy is spec.privateKey.rotationPolicy of a Certificate's
// spec; "" when unset (cert-manager's default applies).
func rotationPolicy(spec map[string]any) string {
	pk, _ := spec["privateKey"].(map[string]any)
	p, _ := pk["rotationPolicy"].(string)
	return p
}

// testCA is a CA certificate and its key, made as cert-manager makes one.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issueCA signs a self-signed CA certificate as cert-manager's selfSigned
// issuer does (pkg/util/pki/csr.go SignCertificate calls
// x509.CreateCertificate with a template from the request,
// certificatetemplate.go CertificateTemplateFromCSR, which sets no
// SubjectKeyId: Go derives it from the public key, and leaves signed by
// the CA get it as AuthorityKeyId).
// A subject key ID given overrides Go's (as the SHA-1 one of Go before
// 1.25, whose x509 now takes truncated SHA-256).
func issueCA(t *testing.T, commonName string, key *ecdsa.PrivateKey, serial int64, notBefore, notAfter time.Time, subjectKeyID ...byte) testCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: commonName},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:     x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		SubjectKeyId: subjectKeyID,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key}
}

// issueServer signs serve's certificate for host with ca, as cert-manager's
// CA issuer does.
func (ca testCA) issueServer(t *testing.T, host string, notBefore time.Time) *x509.Certificate {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(notBefore.UnixNano()), DNSNames: []string{host},
		NotBefore: notBefore, NotAfter: notBefore.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestCARenewalKeepsTrust renews the chart's private CA as cert-manager
// does with the rotation policy the chart sets: same subject, a new serial
// and validity, and the key the policy gives (Never: the key in the
// Secret; Always: a new one). The autoscaler holds the CA certificate it
// read at start, from before the renewal; serve's next certificate is
// signed by the renewed CA. With the chart's policy it must verify against
// the old CA certificate alone, so a renewal needs no restart; with a new
// key (cert-manager's default since 1.18) it must not, which is why the
// chart does not leave the policy to the default.
func TestCARenewalKeepsTrust(t *testing.T) {
	objs := mustRender(t, mergeValues(t, values.Options{ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")}}))
	spec := caCertificate(t, objs)
	if spec == nil {
		t.Fatalf("no CA Certificate among %q", kinds(objs))
	}
	commonName, _ := spec["commonName"].(string)
	host := releaseName + "." + releaseNamespace + ".svc"

	// The CA renews at two thirds of its 10 years (cert-manager's default
	// renewBefore): the old certificate is still valid for 3 years.
	now := time.Now()
	tenYears := 10 * 365 * 24 * time.Hour
	oldKey := newECKey(t)
	old := issueCA(t, commonName, oldKey, 1, now.Add(-tenYears*2/3), now.Add(tenYears/3))

	// The old CA's subject key ID as Go before 1.25 derived it (SHA-1 of
	// the public key): a CA issued by a cert-manager built with it, renewed
	// by one built with a newer Go, keeps its key but not its key ID.
	pub, err := x509.MarshalPKIXPublicKey(&oldKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		Key       asn1.BitString
	}
	if _, err := asn1.Unmarshal(pub, &spki); err != nil {
		t.Fatal(err)
	}
	sha1ID := sha1.Sum(spki.Key.Bytes)
	oldSHA1 := issueCA(t, commonName, oldKey, 1, now.Add(-tenYears*2/3), now.Add(tenYears/3), sha1ID[:]...)

	for _, tc := range []struct {
		policy  string
		old     testCA
		wantOK  bool
		sameKID bool
	}{
		{rotationPolicy(spec), old, true, true},
		{rotationPolicy(spec), oldSHA1, true, false},
		{"Always", old, false, false},
	} {
		t.Run("rotationPolicy="+tc.policy+"/old key ID "+fmt.Sprintf("%x", tc.old.cert.SubjectKeyId), func(t *testing.T) {
			key := oldKey
			switch tc.policy {
			case "Never":
			case "Always", "":
				key = newECKey(t)
			default:
				t.Fatalf("rotationPolicy %q is not one cert-manager knows", tc.policy)
			}
			autoscalerRoots := x509.NewCertPool()
			autoscalerRoots.AddCert(tc.old.cert)
			renewed := issueCA(t, commonName, key, 2, now, now.Add(tenYears))
			if renewed.cert.SerialNumber.Cmp(tc.old.cert.SerialNumber) == 0 || !renewed.cert.NotBefore.After(tc.old.cert.NotBefore) {
				t.Fatal("the renewed CA certificate has the old one's serial or validity")
			}
			server := renewed.issueServer(t, host, now)
			_, err := server.Verify(x509.VerifyOptions{DNSName: host, Roots: autoscalerRoots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now.Add(time.Hour)})
			if tc.wantOK != (err == nil) {
				t.Fatalf("serve's certificate signed by the CA renewed with rotationPolicy %q, verified against the CA certificate from before the renewal: %v; want verified: %v",
					tc.policy, err, tc.wantOK)
			}
			var unknown x509.UnknownAuthorityError
			if err != nil && !errors.As(err, &unknown) {
				t.Errorf("refused with %v; want an unknown authority", err)
			}
			// Go's verifier tries a CA of the issuer's subject whose key ID
			// differs too (crypto/x509 findPotentialParents), so the key,
			// not the key ID, decides.
			if sameKID := string(renewed.cert.SubjectKeyId) == string(tc.old.cert.SubjectKeyId); sameKID != tc.sameKID {
				t.Errorf("subject key IDs %x (renewed) and %x (old) equal: %v; want %v", renewed.cert.SubjectKeyId, tc.old.cert.SubjectKeyId, sameKID, tc.sameKID)
			}
		})
	}
}

// checkCAKept fails the test when an upgrade from before to after changes
// the chart's CA Certificate in a way that makes cert-manager issue it
// again. cert-manager reissues when the key no longer matches
// spec.privateKey's algorithm and size, or the request no longer matches
// the subject, names, isCA, usages, duration or issuerRef
// (internal/controller/certificates/policies/policies.go
// NewTriggerPolicyChain; pkg/util/pki/match.go PrivateKeyMatchesSpec,
// RequestMatchesSpec); privateKey.rotationPolicy is read only when a key
// is made for an issuance (keymanager_controller.go), so a change of it
// alone issues nothing.
func checkCAKept(t *testing.T, before, after []*unstructured.Unstructured) {
	t.Helper()
	was, is := caCertificate(t, before), caCertificate(t, after)
	if was == nil {
		return
	}
	if is == nil {
		t.Fatal("the upgrade drops the CA Certificate")
	}
	strip := func(spec map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range spec {
			out[k] = v
		}
		if pk, ok := spec["privateKey"].(map[string]any); ok {
			kept := map[string]any{}
			for k, v := range pk {
				if k != "rotationPolicy" {
					kept[k] = v
				}
			}
			out["privateKey"] = kept
		}
		return out
	}
	if diff := cmp.Diff(strip(was), strip(is)); diff != "" {
		t.Errorf("the upgrade changes the CA Certificate beyond privateKey.rotationPolicy, so cert-manager would issue the CA again, with a new key that running autoscalers do not trust (-before +after):\n%s", diff)
	}
	if got := rotationPolicy(is); got != "Never" {
		t.Errorf("the upgraded CA Certificate's rotationPolicy %q; want Never", got)
	}
}

// TestCABundle: with tls.caBundle serve verifies clients against the
// bundle's ConfigMap (mounted whole, so its updates reach the file) and
// the autoscaler's cloud-config trusts the bundle at caBundleDir; without
// it both use the ca.crt of the certificates' Secrets. A caBundleDir that
// is the client Secret's directory, in it or above it, a bundle without
// the client name check (any certificate of any CA in it would drive the
// pools), or a ConfigMap name Kubernetes refuses, stops the install.
func TestCABundle(t *testing.T) {
	minimal := filepath.Join(chartDir, "ci", "minimal-values.yaml")
	for _, tc := range []struct {
		name                 string
		set                  []string
		wantVolume, wantFile string // serve's --tls-client-ca: the volume's object and the file in it
		wantCACert           string // the autoscaler's cloud-config
	}{
		{"no bundle", nil, "Secret/hcloudscale-server-tls", "ca.crt", "/etc/hcloudscale/tls/ca.crt"},
		{"a bundle", []string{"tls.caBundle.configMap=hcloudscale-ca", "tls.caBundle.key=bundle.pem"},
			"ConfigMap/hcloudscale-ca", "bundle.pem", "/etc/hcloudscale/ca-bundle/bundle.pem"},
		{"a bundle elsewhere", []string{"tls.caBundle.configMap=hcloudscale-ca", "autoscalerCloudConfig.caBundleDir=/trust/"},
			"ConfigMap/hcloudscale-ca", "ca.crt", "/trust/ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, mergeValues(t, values.Options{ValueFiles: []string{minimal}, Values: tc.set}))
			pod := one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec
			ca := flags(pod.Containers[0].Args)["tls-client-ca"]
			if len(ca) != 1 {
				t.Fatalf("--tls-client-ca %q; want one", ca)
			}
			at, ok := inVolume(pod.Containers[0], ca[0])
			vol, file, _ := strings.Cut(at, "/")
			if got := volumeObject(pod, vol); !ok || got != tc.wantVolume || file != tc.wantFile {
				t.Errorf("--tls-client-ca=%s is %s in %s; want %s in %s", ca[0], file, got, tc.wantFile, tc.wantVolume)
			}
			if cc := renderedCloudConfig(t, objs); cc.CACert != tc.wantCACert || cc.Cert != "/etc/hcloudscale/tls/tls.crt" {
				t.Errorf("cloud-config cacert %s, cert %s; want cacert %s, the client Secret's cert", cc.CACert, cc.Cert, tc.wantCACert)
			}
		})
	}
	for _, tc := range []struct{ set, want string }{
		{"autoscalerCloudConfig.caBundleDir=/etc/hcloudscale/tls/", "autoscalerCloudConfig.caBundleDir (/etc/hcloudscale/tls/) is autoscalerCloudConfig.certDir"},
		{"autoscalerCloudConfig.caBundleDir=/etc/hcloudscale/tls/bundle", "autoscalerCloudConfig.caBundleDir (/etc/hcloudscale/tls/bundle) is autoscalerCloudConfig.certDir"},
		{"autoscalerCloudConfig.caBundleDir=/etc", "autoscalerCloudConfig.caBundleDir (/etc) is autoscalerCloudConfig.certDir"},
		{"tls.verifyClientName=false", "tls.caBundle.configMap needs tls.verifyClientName"},
		{"tls.caBundle.key=ca/crt", "/tls/caBundle/key"},
	} {
		_, err := render(t, mergeValues(t, values.Options{ValueFiles: []string{minimal}, Values: []string{"tls.caBundle.configMap=hcloudscale-ca", tc.set}}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: %v; want an error naming %s", tc.set, err, tc.want)
		}
	}
}

// volumeObject is "Kind/name" of the Secret or ConfigMap of the pod's
// volume name, mounted whole (no items).
func volumeObject(pod corev1.PodSpec, name string) string {
	for _, v := range pod.Volumes {
		switch {
		case v.Name != name:
		case v.Secret != nil && len(v.Secret.Items) == 0:
			return "Secret/" + v.Secret.SecretName
		case v.ConfigMap != nil && len(v.ConfigMap.Items) == 0:
			return "ConfigMap/" + v.ConfigMap.Name
		}
	}
	return ""
}

// renderedCloudConfig is the autoscaler's cloud-config the chart renders.
func renderedCloudConfig(t *testing.T, objs []*unstructured.Unstructured) cloudConfig {
	t.Helper()
	for _, o := range find(objs, "ConfigMap") {
		if data := typed(t, o).(*corev1.ConfigMap).Data["cloud-config.yaml"]; data != "" {
			var cc cloudConfig
			if err := yaml.UnmarshalStrict([]byte(data), &cc); err != nil {
				t.Fatalf("cloud-config.yaml: %v", err)
			}
			return cc
		}
	}
	t.Fatalf("no cloud-config ConfigMap among %q", kinds(objs))
	return cloudConfig{}
}
