package externalgrpc_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
)

// TestPinnedClientCertificate: during a switch of the client identity the
// autoscaler's certificate of the former identity (only CN=cluster-autoscaler)
// is accepted exactly as it is; another certificate of the same CA with the
// same subject is refused, and so is the pinned one from another CA. The
// pin file is reread when it changes, and an empty one pins nothing.
func TestPinnedClientCertificate(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	legacy := p.sign(t, leafSpec{commonName: "cluster-autoscaler", usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	sameSubject := p.sign(t, leafSpec{commonName: "cluster-autoscaler", usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	current := p.sign(t, leafSpec{dnsNames: []string{autoscalerName}, usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	pinFile := filepath.Join(t.TempDir(), "pinned.pem")
	writePins(t, pinFile, legacy.Leaf)

	serverTLS, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, p.caFile,
		externalgrpc.WithClientNames(autoscalerName), externalgrpc.WithPinnedClientCertificates(pinFile))
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	te := &tlsEnv{env: newEnv(t, envOptions{serverTLS: serverTLS, clientTLS: p.clientTLS(true), logger: zap.NewNop()}), pki: p}
	check := func(name string, cert tls.Certificate, served bool) {
		t.Helper()
		_, err := te.call(&cert)
		if served && err != nil {
			t.Errorf("%s: %v; want an answer", name, err)
		}
		if !served && status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v; want the handshake refused", name, err)
		}
	}
	check("the pinned certificate", legacy, true)
	check("the current identity", current, true)
	check("another certificate of the pinned one's subject", sameSubject, false)

	// The pin ends when the file no longer holds it.
	time.Sleep(10 * time.Millisecond) // a modification time of its own
	writePins(t, pinFile)
	check("the former pin after the file was emptied", legacy, false)
	check("the current identity with no pin", current, true)

	// The pin is no trust anchor: a pinned certificate of another CA is
	// refused.
	foreign := newPKI(t).sign(t, leafSpec{commonName: "cluster-autoscaler", usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	time.Sleep(10 * time.Millisecond)
	writePins(t, pinFile, legacy.Leaf, foreign.Leaf)
	check("a pinned certificate of another CA", foreign, false)
	check("the pinned certificate, back in the file", legacy, true)
}

// TestPinnedClientCertificateFileRefused: a pin file that is not PEM
// certificates fails at start, naming the file.
func TestPinnedClientCertificateFileRefused(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	for name, content := range map[string]string{
		"key.pem":     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})),
		"garbage.pem": "not a certificate",
		"bad.pem":     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}})),
	} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, p.caFile,
			externalgrpc.WithClientNames(autoscalerName), externalgrpc.WithPinnedClientCertificates(file))
		if err == nil || !strings.Contains(err.Error(), "pinned client certificates") {
			t.Errorf("%s: %v; want an error naming the pinned certificates", name, err)
		}
	}
}

func writePins(t *testing.T, file string, certs ...*x509.Certificate) {
	t.Helper()
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
