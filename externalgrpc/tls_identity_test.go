package externalgrpc_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// The identity serve is told to accept (--tls-client-name), as a DNS name
// and as a SPIFFE URI.
const (
	autoscalerName = "cluster-autoscaler.kube-system.hcloudscale"
	autoscalerURI  = "spiffe://cluster.local/ns/kube-system/sa/cluster-autoscaler"
)

// tlsEnv is a Server with mutual TLS that accepts autoscalerName and
// autoscalerURI, its logs at warn level and above, and its PKI.
type tlsEnv struct {
	*env
	pki  *pki
	logs *observer.ObservedLogs
}

func newTLSEnv(t *testing.T) *tlsEnv {
	t.Helper()
	p := newPKI(t)
	serverTLS, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, p.caFile,
		externalgrpc.WithClientNames(autoscalerName, autoscalerURI))
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	e := newEnv(t, envOptions{serverTLS: serverTLS, clientTLS: p.clientTLS(true), logger: zap.New(core)})
	return &tlsEnv{env: e, pki: p, logs: logs}
}

// clientCert issues a client certificate valid from notBefore to notAfter.
func (te *tlsEnv) clientCert(notBefore, notAfter time.Time, dnsNames ...string) tls.Certificate {
	return te.pki.sign(te.t, leafSpec{commonName: "cluster-autoscaler", dnsNames: dnsNames,
		usage: x509.ExtKeyUsageClientAuth, notBefore: notBefore, notAfter: notAfter})
}

// call makes one call on a new connection that presents cert (none if
// nil), as the autoscaler does after a restart or a reconnect, and
// returns the error and the server's certificate.
func (te *tlsEnv) call(cert *tls.Certificate) (*x509.Certificate, error) {
	te.t.Helper()
	cfg := te.pki.clientTLS(false)
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(te.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		te.t.Fatal(err)
	}
	defer conn.Close()
	var p peer.Peer
	_, err = protos.NewCloudProviderClient(conn).NodeGroups(te.ctx(), &protos.NodeGroupsRequest{}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0], nil
}

// metric is the value of the series of name with the label value, -1
// when it is absent.
func (te *tlsEnv) metric(name, label, value string) float64 {
	te.t.Helper()
	mfs, err := te.reg.Gather()
	if err != nil {
		te.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, label, value) {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func (te *tlsEnv) failures(reason string) float64 {
	return te.metric("hcloudscale_tls_handshake_failures_total", "reason", reason)
}

func (te *tlsEnv) expiry(cert string) float64 {
	return te.metric("hcloudscale_tls_certificate_expiry_timestamp_seconds", "cert", cert)
}

// TestClientCertificateRotation renews the autoscaler's client
// certificate as cert-manager does (new key, same CA and name): the old
// one keeps working until it expires, the new one works at once, and an
// expired one is refused, counted and logged with its reason.
func TestClientCertificateRotation(t *testing.T) {
	te := newTLSEnv(t)
	now := time.Now()
	old := te.clientCert(now.Add(-60*24*time.Hour), now.Add(30*24*time.Hour), autoscalerName)
	renewed := te.clientCert(now.Add(-time.Minute), now.Add(90*24*time.Hour), autoscalerName)
	expired := te.clientCert(now.Add(-90*24*time.Hour), now.Add(-time.Hour), autoscalerName)

	for _, tc := range []struct {
		name string
		cert tls.Certificate
	}{{"old, still valid", old}, {"renewed", renewed}, {"old again, beside the renewed one", old}} {
		if _, err := te.call(&tc.cert); err != nil {
			t.Fatalf("%s: NodeGroups: %v; want an answer", tc.name, err)
		}
		if got, want := te.expiry("client"), float64(tc.cert.Leaf.NotAfter.Unix()); got != want {
			t.Errorf("%s: client certificate expiry = %v; want %v, the last accepted one's", tc.name, got, want)
		}
	}

	for i := range 3 {
		if _, err := te.call(&expired); status.Code(err) != codes.Unavailable {
			t.Fatalf("expired certificate, attempt %d: %v; want Unavailable", i+1, err)
		}
	}
	te.eventually("3 expired handshakes counted", 0, func() bool { return te.failures(externalgrpc.ReasonExpired) >= 3 })
	refused := te.logs.FilterMessage("TLS handshake refused").FilterField(zap.String("reason", externalgrpc.ReasonExpired)).All()
	if len(refused) != 1 {
		t.Fatalf("log lines for expired = %d; want 1 (rate-limited): %v", len(refused), refused)
	}
	fields := refused[0].ContextMap()
	if fields["not_after"] == nil || !strings.HasPrefix(fields["peer"].(string), "127.0.0.1:") ||
		!strings.Contains(fields["subject"].(string), "cluster-autoscaler") || refused[0].Level != zapcore.WarnLevel {
		t.Errorf("log line %v %v: want warn with not_after, subject and peer", refused[0].Level, fields)
	}
	if got := te.expiry("client"); got != float64(old.Leaf.NotAfter.Unix()) {
		t.Errorf("client certificate expiry after refusals = %v; want the last accepted one's", got)
	}
}

// TestClientCertificateRefused covers each reason a client is refused for.
func TestClientCertificateRefused(t *testing.T) {
	te := newTLSEnv(t)
	now := time.Now()
	valid := func(names ...string) *tls.Certificate {
		c := te.clientCert(now.Add(-time.Hour), now.Add(time.Hour), names...)
		return &c
	}
	future := te.clientCert(now.Add(time.Hour), now.Add(2*time.Hour), autoscalerName)
	otherCA := newPKI(t).sign(t, leafSpec{dnsNames: []string{autoscalerName}, usage: x509.ExtKeyUsageClientAuth,
		notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	serverUsage := te.pki.sign(t, leafSpec{dnsNames: []string{autoscalerName}, usage: x509.ExtKeyUsageServerAuth,
		notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})
	uri := te.pki.sign(t, leafSpec{uris: []string{autoscalerURI}, usage: x509.ExtKeyUsageClientAuth,
		notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)})

	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		reason string // empty: served
	}{
		{"DNS name", valid(autoscalerName), ""},
		{"URI", &uri, ""},
		{"DNS name among others", valid("other.example", autoscalerName), ""},
		{"another identity of the same CA", valid("intruder.kube-system"), externalgrpc.ReasonWrongIdentity},
		{"no subject alternative name: the common name is no identity", valid(), externalgrpc.ReasonWrongIdentity},
		{"not yet valid", &future, externalgrpc.ReasonNotYetValid},
		{"another CA", &otherCA, externalgrpc.ReasonUnknownAuthority},
		{"no certificate", nil, externalgrpc.ReasonNoCertificate},
		{"server usage only", &serverUsage, externalgrpc.ReasonOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := te.failures(tc.reason)
			_, err := te.call(tc.cert)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("NodeGroups: %v; want an answer", err)
				}
				return
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("NodeGroups: %v; want Unavailable", err)
			}
			te.eventually(tc.reason+" counted", 0, func() bool { return te.failures(tc.reason) >= before+1 })
			if n := len(te.logs.FilterField(zap.String("reason", tc.reason)).All()); n != 1 {
				t.Errorf("log lines with reason %s = %d; want 1", tc.reason, n)
			}
		})
	}
	for _, l := range te.logs.All() {
		for k, v := range l.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "PRIVATE KEY") {
				t.Errorf("log field %s carries key material", k)
			}
		}
	}
}

// TestServerCertificateRefusedByTheClient: an autoscaler that holds a CA
// that did not sign serve's certificate (the CA's key rotated since it
// started) refuses the handshake; serve counts and logs it with its own
// reason, not as "other", so the alert can say what to do.
func TestServerCertificateRefusedByTheClient(t *testing.T) {
	te := newTLSEnv(t)
	client := te.clientCert(time.Now().Add(-time.Hour), time.Now().Add(time.Hour), autoscalerName)
	rotated := te.pki.clientTLS(false)
	rotated.RootCAs = newPKI(t).pool
	rotated.Certificates = []tls.Certificate{client}
	conn, err := grpc.NewClient(te.addr, grpc.WithTransportCredentials(credentials.NewTLS(rotated)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := protos.NewCloudProviderClient(conn).NodeGroups(te.ctx(), &protos.NodeGroupsRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("NodeGroups with another CA: %v; want Unavailable", err)
	}
	te.eventually("the refusal counted", 0, func() bool { return te.failures(externalgrpc.ReasonServerCertificateRefused) >= 1 })
	if other := te.failures(externalgrpc.ReasonOther); other != 0 {
		t.Errorf("handshakes counted as other: %v; want 0", other)
	}
	if n := len(te.logs.FilterField(zap.String("reason", externalgrpc.ReasonServerCertificateRefused)).All()); n != 1 {
		t.Errorf("log lines with reason %s = %d; want 1", externalgrpc.ReasonServerCertificateRefused, n)
	}
	if _, err := te.call(&client); err != nil {
		t.Errorf("NodeGroups with the CA that signed serve's certificate: %v", err)
	}
}

// TestServerCertificateRotationOverGRPC renews serve's own certificate in
// place: the next connection gets the new one and the expiry metric
// follows it without a restart.
func TestServerCertificateRotationOverGRPC(t *testing.T) {
	te := newTLSEnv(t)
	client := te.clientCert(time.Now().Add(-time.Hour), time.Now().Add(time.Hour), autoscalerName)
	first, err := te.call(&client)
	if err != nil {
		t.Fatalf("NodeGroups: %v", err)
	}
	if got := te.expiry("server"); got != float64(first.NotAfter.Unix()) {
		t.Errorf("server certificate expiry = %v; want %d", got, first.NotAfter.Unix())
	}
	renewed := te.pki.sign(t, leafSpec{commonName: "server", usage: x509.ExtKeyUsageServerAuth,
		notBefore: time.Now().Add(-time.Minute), notAfter: time.Now().Add(90 * 24 * time.Hour)})
	te.pki.write(t, "server", renewed)
	at := time.Now().Add(time.Minute) // in case the file system's time resolution is coarse
	for _, f := range []string{te.pki.serverCert, te.pki.serverKey} {
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
	}
	second, err := te.call(&client)
	if err != nil {
		t.Fatalf("NodeGroups after the renewal: %v", err)
	}
	if second.SerialNumber.Cmp(renewed.Leaf.SerialNumber) != 0 {
		t.Errorf("server certificate serial after renewal = %s; want %s", second.SerialNumber, renewed.Leaf.SerialNumber)
	}
	if got := te.expiry("server"); got != float64(renewed.Leaf.NotAfter.Unix()) {
		t.Errorf("server certificate expiry after renewal = %v; want %d", got, renewed.Leaf.NotAfter.Unix())
	}
}
