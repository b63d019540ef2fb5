package externalgrpc

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ServerTLSConfig returns the TLS configuration the autoscaler's client
// expects: the server presents certFile/keyFile and demands a client
// certificate that verifies against clientCAFile (mutual TLS), which may
// hold several CA certificates (a trust bundle of an old and a new CA). The
// autoscaler has no server-only TLS mode, and without client verification
// anyone who reaches the port could create and delete servers. With
// [WithClientNames] the client certificate must also name one of the
// given identities.
//
// The files are read now, so that a mistake is reported at start-up, and
// read again at a handshake after any of them changed (size or
// modification time), so certificates that cert-manager renews in a
// mounted Secret take effect without a restart. A half-written renewal
// keeps the previous configuration until the files agree again.
//
// A refused client fails the handshake with a [*ClientCertError] naming
// the reason; [Server.ServerOptions] counts and logs it.
func ServerTLSConfig(certFile, keyFile, clientCAFile string, opts ...TLSOption) (*tls.Config, error) {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"certificate", certFile}, {"key", keyFile}, {"client CA", clientCAFile},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("tls: %s file is not set", f.name))
		}
	}
	var o tlsOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	for i, n := range o.names {
		if strings.TrimSpace(n) == "" {
			errs = append(errs, fmt.Errorf("tls: client name %d is empty", i+1))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r := &tlsReloader{certFile: certFile, keyFile: keyFile, caFile: clientCAFile, names: o.names, pinnedFile: o.pinnedFile, reloadErr: o.reloadErr}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current()
		},
	}, nil
}

// TLSOption configures [ServerTLSConfig].
type TLSOption func(*tlsOptions)

type tlsOptions struct {
	names      []string
	pinnedFile string
	reloadErr  func(error)
}

// WithReloadErrors calls report when the files changed but cannot be
// loaded (a half-written file, a client CA file without a certificate, a
// key that does not match): the server keeps the configuration it had,
// and report says why, once for each state of the files.
func WithReloadErrors(report func(error)) TLSOption {
	return func(o *tlsOptions) { o.reloadErr = report }
}

// WithClientNames accepts only client certificates that carry one of
// names as a DNS name or a URI in their subject alternative names. A
// shared issuer then cannot mint a certificate that drives the pools
// unless it also names the autoscaler. Without it any certificate of the
// client CA is accepted.
func WithClientNames(names ...string) TLSOption {
	return func(o *tlsOptions) { o.names = append(o.names, names...) }
}

// WithPinnedClientCertificates also accepts a client that presents exactly
// one of the certificates of the PEM file, whatever names it carries: the
// transition from a client certificate issued for another identity (a
// chart that changed --tls-client-name) while the autoscaler still holds
// it in memory. The certificate must still verify against the client CA
// and be valid, so a pin ends when it expires; no other certificate of
// the CA gains anything. The file may be empty and is reread when it
// changes, as the others are.
func WithPinnedClientCertificates(file string) TLSOption {
	return func(o *tlsOptions) { o.pinnedFile = file }
}

// tlsReloader rebuilds the server's TLS configuration when its files change.
type tlsReloader struct {
	certFile, keyFile, caFile string
	names                     []string
	// pinnedFile is the PEM file of WithPinnedClientCertificates; "" for none.
	pinnedFile string
	// reloadErr is WithReloadErrors' report; nil for none.
	reloadErr func(error)

	// mu guards stamp, cfg and failed: the file state cfg was built from,
	// and the last one that failed to load and was reported.
	mu     sync.Mutex
	stamp  string
	cfg    *tls.Config
	failed string
}

func (r *tlsReloader) current() (*tls.Config, error) {
	stamp, err := r.fileStamp()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && stamp == r.stamp && r.cfg != nil {
		return r.cfg, nil
	}
	cfg, lerr := r.load()
	if err := errors.Join(err, lerr); err != nil {
		if r.cfg == nil {
			return nil, err
		}
		if key := stamp + err.Error(); r.reloadErr != nil && key != r.failed {
			r.failed = key
			r.reloadErr(err)
		}
		return r.cfg, nil
	}
	r.stamp, r.cfg, r.failed = stamp, cfg, ""
	return cfg, nil
}

// fileStamp sums up the size and modification time of the files.
func (r *tlsReloader) fileStamp() (string, error) {
	var stamp string
	for _, name := range []string{r.certFile, r.keyFile, r.caFile, r.pinnedFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

func (r *tlsReloader) load() (*tls.Config, error) {
	var errs []error
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("tls: server certificate %s and key %s: %w", r.certFile, r.keyFile, err))
	}
	pool := x509.NewCertPool()
	cas, err := readCertificates(r.caFile, "client CA")
	switch {
	case err != nil:
		errs = append(errs, err)
	case len(cas) == 0:
		errs = append(errs, fmt.Errorf("tls: client CA %s: no PEM certificate found", r.caFile))
	}
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	pinned, err := loadPinned(r.pinnedFile)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// crypto/tls would refuse a bad client certificate without saying why;
	// verifyClient does the same checks and names the reason.
	v := clientVerifier{roots: pool, names: r.names, pinned: pinned}
	return &tls.Config{
		MinVersion:       tls.VersionTLS12,
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequestClientCert,
		ClientCAs:        pool,
		VerifyConnection: v.verify,
	}, nil
}

// loadPinned reads the certificates of a PEM file ("" for none); an empty
// file pins nothing.
func loadPinned(file string) ([][]byte, error) {
	if file == "" {
		return nil, nil
	}
	certs, err := readCertificates(file, "pinned client certificates")
	var out [][]byte
	for _, c := range certs {
		out = append(out, c.Raw)
	}
	return out, err
}

// readCertificates parses every block of a PEM file as a certificate. A
// block of another type, a certificate that does not parse, or text after
// the last block (a certificate cut off in the middle of a write) is an
// error naming the file, so that a half-written file is never taken for
// fewer certificates: serve keeps what it had until the file is whole.
func readCertificates(file, what string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", what, err)
	}
	var out []*x509.Certificate
	for i := 1; ; i++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("tls: %s %s: block %d is a %s, not a CERTIFICATE", what, file, i, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls: %s %s: certificate %d: %w", what, file, i, err)
		}
		out = append(out, c)
	}
	switch {
	case len(strings.TrimSpace(string(data))) == 0:
		return out, nil
	case len(out) == 0:
		return nil, fmt.Errorf("tls: %s %s: no PEM certificate found", what, file)
	default:
		return nil, fmt.Errorf("tls: %s %s: text that is not PEM after %d certificates", what, file, len(out))
	}
}
