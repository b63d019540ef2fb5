package externalgrpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
)

// handshakeLogEvery is the shortest time between two log lines of
// refused handshakes with the same reason: a client retrying with an
// expired certificate would otherwise log every second.
const handshakeLogEvery = time.Minute

// tlsMetrics are the handshake failures and the certificates' expiry.
type tlsMetrics struct {
	failures *prometheus.CounterVec
	expiry   *expiryCollector
}

func newTLSMetrics(reg prometheus.Registerer) *tlsMetrics {
	m := &tlsMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hcloudscale", Subsystem: "tls", Name: "handshake_failures_total",
			Help: "TLS handshakes of the externalgrpc service refused, by reason: expired, not_yet_valid, unknown_authority, wrong_identity, no_certificate (the client's certificate); server_certificate_refused (the client did not trust serve's); other.",
		}, []string{"reason"}),
		expiry: &expiryCollector{desc: prometheus.NewDesc("hcloudscale_tls_certificate_expiry_timestamp_seconds",
			"NotAfter of serve's own certificate (cert=server) and of the client certificate of the last accepted handshake (cert=client), in Unix seconds.",
			[]string{"cert"}, nil)},
	}
	for _, r := range []string{ReasonExpired, ReasonNotYetValid, ReasonUnknownAuthority, ReasonWrongIdentity, ReasonNoCertificate, ReasonServerCertificateRefused, ReasonOther} {
		m.failures.WithLabelValues(r) // every reason from zero, so rate() sees the first failure
	}
	if reg == nil {
		return m
	}
	m.failures = register(reg, m.failures)
	m.expiry = register(reg, m.expiry)
	return m
}

// expiryCollector reports the certificates' NotAfter. The server's is
// read from the TLS configuration at each scrape, so a renewal on disk
// shows at once; the client's is that of the last accepted handshake: the
// autoscaler reads its certificate once at start, so this is the one it
// will present at its next reconnect, not the newest in its Secret.
type expiryCollector struct {
	desc   *prometheus.Desc
	server atomic.Pointer[tls.Config]
	client atomic.Int64 // Unix seconds; 0 before the first handshake
}

func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	if cert := serverCertificate(c.server.Load()); cert != nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), "server")
	}
	if at := c.client.Load(); at != 0 {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(at), "client")
	}
}

// serverCertificate is the certificate cfg presents now; nil without one.
func serverCertificate(cfg *tls.Config) *x509.Certificate {
	if cfg != nil && cfg.GetConfigForClient != nil {
		if cur, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{}); err == nil && cur != nil {
			cfg = cur
		}
	}
	if cfg == nil || len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return nil
	}
	if leaf := cfg.Certificates[0].Leaf; leaf != nil {
		return leaf
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// observedCreds are grpc-go's TLS credentials that count and log refused
// handshakes, which grpc-go's server otherwise drops without a word.
type observedCreds struct {
	credentials.TransportCredentials
	m   *tlsMetrics
	log *handshakeLog
}

func (c *observedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		// A connection closed before its first byte (a TCP probe, a port
		// scan) is no handshake.
		if !errors.Is(err, io.EOF) {
			reason, cert := ReasonOther, (*x509.Certificate)(nil)
			if ce, ok := errors.AsType[*ClientCertError](err); ok {
				reason, cert = ce.Reason, ce.Cert
			} else if refusedServerCertificate(err) {
				reason = ReasonServerCertificateRefused
			}
			c.m.failures.WithLabelValues(reason).Inc()
			c.log.refused(reason, raw.RemoteAddr(), cert, err)
		}
		return conn, info, err
	}
	if ti, ok := info.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
		c.m.expiry.client.Store(ti.State.PeerCertificates[0].NotAfter.Unix())
	}
	return conn, info, nil
}

// refusedServerCertificate reports whether the client ended the handshake
// with the alert a TLS client sends when it does not trust the server's
// certificate: crypto/tls returns a peer's alert as a *net.OpError of Op
// "remote error" whose Err is the alert (bad_certificate is what Go's
// client sends for any verification failure, unknown_ca what others send
// for an unknown issuer).
func refusedServerCertificate(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	if !ok || op.Op != "remote error" || op.Err == nil {
		return false
	}
	alert := op.Err.Error()
	return alert == "tls: bad certificate" || alert == "tls: unknown certificate authority"
}

func (c *observedCreds) Clone() credentials.TransportCredentials {
	return &observedCreds{TransportCredentials: c.TransportCredentials.Clone(), m: c.m, log: c.log}
}

// handshakeLog logs refused handshakes at warn level, at most one line
// per reason and handshakeLogEvery, with the number left out since.
type handshakeLog struct {
	log *zap.Logger
	// mu guards last and suppressed, by reason.
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

func newHandshakeLog(log *zap.Logger) *handshakeLog {
	return &handshakeLog{log: log, last: map[string]time.Time{}, suppressed: map[string]int{}}
}

func (l *handshakeLog) refused(reason string, peer net.Addr, cert *x509.Certificate, err error) {
	now := time.Now()
	l.mu.Lock()
	if last, ok := l.last[reason]; ok && now.Sub(last) < handshakeLogEvery {
		l.suppressed[reason]++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed[reason]
	l.last[reason], l.suppressed[reason] = now, 0
	l.mu.Unlock()

	fields := []zap.Field{zap.String("reason", reason), zap.Error(err), zap.Int("suppressed", suppressed)}
	if peer != nil {
		fields = append(fields, zap.String("peer", peer.String()))
	}
	if cert != nil {
		uris := make([]string, len(cert.URIs))
		for i, u := range cert.URIs {
			uris[i] = u.String()
		}
		fields = append(fields, zap.String("subject", cert.Subject.String()), zap.Strings("dns_names", cert.DNSNames),
			zap.Strings("uris", uris), zap.String("issuer", cert.Issuer.String()),
			zap.Time("not_before", cert.NotBefore), zap.Time("not_after", cert.NotAfter))
	}
	l.log.Warn("TLS handshake refused", fields...)
}
