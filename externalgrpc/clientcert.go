package externalgrpc

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The reasons a client's handshake is refused: the values of the reason
// label of hcloudscale_tls_handshake_failures_total and of
// [ClientCertError.Reason].
const (
	ReasonExpired          = "expired"
	ReasonNotYetValid      = "not_yet_valid"
	ReasonUnknownAuthority = "unknown_authority"
	ReasonWrongIdentity    = "wrong_identity"
	ReasonNoCertificate    = "no_certificate"
	// ReasonServerCertificateRefused is a client that refused serve's own
	// certificate (its TLS alert bad_certificate or unknown_ca): the
	// autoscaler holds a CA that did not sign it, as after a rotation of
	// the CA's key, since it reads its CA only at start; or it dials
	// another name than the certificate's.
	ReasonServerCertificateRefused = "server_certificate_refused"
	// ReasonOther is any other failed handshake: a certificate for another
	// use, a protocol mismatch, plaintext on the TLS port.
	ReasonOther = "other"
)

// ClientCertError is why a client certificate was refused.
type ClientCertError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Cert is the client's certificate; nil when it sent none.
	Cert *x509.Certificate
	Err  error
}

func (e *ClientCertError) Error() string {
	return fmt.Sprintf("tls: client certificate refused (%s): %v", e.Reason, e.Err)
}

func (e *ClientCertError) Unwrap() error { return e.Err }

// clientVerifier checks a client's certificate as crypto/tls does with
// RequireAndVerifyClientCert (chain to roots, client-auth usage, validity)
// and then its identity, so that a refusal names its reason.
type clientVerifier struct {
	roots *x509.CertPool
	// names are the accepted identities; empty accepts any.
	names []string
	// pinned are certificates (DER) accepted whatever their names.
	pinned [][]byte
}

func (v clientVerifier) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return &ClientCertError{Reason: ReasonNoCertificate, Err: errors.New("the client sent no certificate")}
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	now := time.Now()
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: v.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return &ClientCertError{Reason: verifyReason(err, leaf, now), Cert: leaf, Err: err}
	}
	if len(v.names) > 0 && !hasName(leaf, v.names) && !slices.ContainsFunc(v.pinned, func(der []byte) bool { return bytes.Equal(der, leaf.Raw) }) {
		return &ClientCertError{Reason: ReasonWrongIdentity, Cert: leaf,
			Err: fmt.Errorf("its DNS and URI names carry none of %s", strings.Join(v.names, ", "))}
	}
	return nil
}

// verifyReason classifies an error of x509.Certificate.Verify.
func verifyReason(err error, leaf *x509.Certificate, now time.Time) string {
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return ReasonUnknownAuthority
	}
	if inv, ok := errors.AsType[x509.CertificateInvalidError](err); ok && inv.Reason == x509.Expired {
		// Verify says Expired for both ends of the validity period, and
		// for a CA of the chain.
		if now.Before(leaf.NotBefore) {
			return ReasonNotYetValid
		}
		return ReasonExpired
	}
	return ReasonOther
}

// hasName reports whether c carries one of names as a DNS or URI subject
// alternative name. The common name is not an identity: cert-manager
// limits it to 64 bytes and modern verifiers ignore it.
func hasName(c *x509.Certificate, names []string) bool {
	for _, n := range names {
		for _, d := range c.DNSNames {
			if strings.EqualFold(d, n) {
				return true
			}
		}
		for _, u := range c.URIs {
			if u.String() == n {
				return true
			}
		}
	}
	return false
}
