package externalgrpc_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
)

// TestClientCABundle rotates the CA of the client certificates through a
// trust bundle, as trust-manager updates a mounted ConfigMap: the client
// CA file first holds the old CA, then the old and the new CA in one PEM
// file (both of the same subject, as a CA renewed with a new key is), then
// the new one only. serve rereads it at the next handshake: while it holds
// both, client certificates of either CA are accepted, so the autoscaler
// keeps the certificate it holds in memory while the server side moves to
// the new CA; a CA in neither file is refused throughout.
func TestClientCABundle(t *testing.T) {
	old, renewed := newPKI(t), newPKI(t)
	if old.ca.Subject.String() != renewed.ca.Subject.String() {
		t.Fatalf("CA subjects %q and %q; want one subject with two keys", old.ca.Subject, renewed.ca.Subject)
	}
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	writeBundle(t, bundle, time.Now(), old.ca)
	te := bundleEnv(t, old, bundle)
	now := time.Now()
	certs := map[string]tls.Certificate{"old CA": bundleClient(t, old, now), "new CA": bundleClient(t, renewed, now), "another CA": bundleClient(t, newPKI(t), now)}
	for i, step := range []struct {
		name     string
		cas      []*x509.Certificate
		accepted map[string]bool
	}{
		{"the old CA", []*x509.Certificate{old.ca}, map[string]bool{"old CA": true}},
		{"the old and the new CA", []*x509.Certificate{old.ca, renewed.ca}, map[string]bool{"old CA": true, "new CA": true}},
		{"the new and the old CA", []*x509.Certificate{renewed.ca, old.ca}, map[string]bool{"old CA": true, "new CA": true}},
		{"the new CA", []*x509.Certificate{renewed.ca}, map[string]bool{"new CA": true}},
	} {
		// A modification time of its own: serve sees the file change.
		writeBundle(t, bundle, now.Add(time.Duration(i+1)*time.Minute), step.cas...)
		for name, cert := range certs {
			_, err := te.call(&cert)
			switch {
			case step.accepted[name] && err != nil:
				t.Errorf("client CA file with %s: a client certificate of the %s: %v; want an answer", step.name, name, err)
			case !step.accepted[name] && status.Code(err) != codes.Unavailable:
				t.Errorf("client CA file with %s: a client certificate of the %s: %v; want the handshake refused", step.name, name, err)
			}
		}
	}
	// Two refusals in the first and the last step, one in the others.
	te.eventually("6 handshakes refused as "+externalgrpc.ReasonUnknownAuthority, 0, func() bool {
		return te.failures(externalgrpc.ReasonUnknownAuthority) == 6
	})
}

// writeBundle writes the CA certificates into one PEM file, as a trust
// bundle holds them, with the modification time at.
func writeBundle(t *testing.T, file string, at time.Time, cas ...*x509.Certificate) {
	t.Helper()
	var b bytes.Buffer
	for _, ca := range cas {
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestClientCABundleHalfWritten: a client CA file caught in the middle of
// a write that does not swap the file at once (empty, a certificate cut
// off, a block that does not parse) keeps the trust serve had: client
// certificates of both CAs of the bundle stay accepted until the file
// holds whole certificates again, and each state of the file is reported
// once ([externalgrpc.WithReloadErrors]). At the start such a file is an
// error naming it.
func TestClientCABundleHalfWritten(t *testing.T) {
	old, renewed := newPKI(t), newPKI(t)
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	writeBundle(t, bundle, time.Now(), old.ca, renewed.ca)
	var mu sync.Mutex
	var reported []error
	te := bundleEnv(t, old, bundle, externalgrpc.WithReloadErrors(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	now := time.Now()
	certs := map[string]tls.Certificate{"old CA": bundleClient(t, old, now), "new CA": bundleClient(t, renewed, now)}
	whole := readFile(t, bundle)
	broken := "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n"
	for i, step := range []struct{ name, content string }{
		{"empty", ""},
		{"the second certificate cut off", whole[:len(whole)-200]},
		{"the second certificate's first line only", whole[:len(whole)/2+40]},
		{"a block that is no certificate", whole + broken},
	} {
		if err := os.WriteFile(bundle, []byte(step.content), 0o600); err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Duration(i+1) * time.Minute)
		if err := os.Chtimes(bundle, at, at); err != nil {
			t.Fatal(err)
		}
		for name, cert := range certs {
			if _, err := te.call(&cert); err != nil {
				t.Errorf("client CA file %s: a client certificate of the %s: %v; want the previous trust kept", step.name, name, err)
			}
		}
		_, err := externalgrpc.ServerTLSConfig(old.serverCert, old.serverKey, bundle)
		if err == nil || !strings.Contains(err.Error(), bundle) {
			t.Errorf("ServerTLSConfig with a client CA file %s: %v; want an error naming %s", step.name, err, bundle)
		}
		// Reported once for this state of the file, however many
		// handshakes met it.
		mu.Lock()
		if len(reported) != i+1 || !strings.Contains(reported[i].Error(), bundle) {
			t.Errorf("client CA file %s: reload errors reported %v; want %d, the last naming %s", step.name, reported, i+1, bundle)
		}
		mu.Unlock()
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bundleEnv serves p's server certificate, verifying clients against the
// CA file bundle and the autoscaler's name.
func bundleEnv(t *testing.T, p *pki, bundle string, opts ...externalgrpc.TLSOption) *tlsEnv {
	t.Helper()
	serverTLS, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, bundle, append(opts, externalgrpc.WithClientNames(autoscalerName))...)
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	return &tlsEnv{env: newEnv(t, envOptions{serverTLS: serverTLS, clientTLS: p.clientTLS(true), logger: zap.NewNop()}), pki: p}
}

// bundleClient is a client certificate of p's CA for the autoscaler's
// name, valid an hour either side of now.
func bundleClient(t *testing.T, p *pki, now time.Time) tls.Certificate {
	t.Helper()
	return p.sign(t, leafSpec{dnsNames: []string{autoscalerName}, usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
}
