package hcloudscale

import (
	"crypto/tls"
	"net/http"
	"testing"
)

// The write transport speaks HTTP/1.1 only, whatever the transport it is
// cloned from says, so that a write has its connection to itself.
func TestGuardedTransportIsHTTP1Only(t *testing.T) {
	h2 := &http.Transport{ForceAttemptHTTP2: true, Protocols: new(http.Protocols)}
	h2.Protocols.SetHTTP2(true)
	h2.Protocols.SetUnencryptedHTTP2(true)
	got := newGuardedTransport(h2).(*http.Transport)
	if got.ForceAttemptHTTP2 || got.Protocols == nil || got.Protocols.HTTP2() || got.Protocols.UnencryptedHTTP2() || !got.Protocols.HTTP1() {
		t.Errorf("write transport: ForceAttemptHTTP2 %v, Protocols %v; want HTTP/1.1 only", got.ForceAttemptHTTP2, got.Protocols)
	}
	if got.TLSNextProto == nil || len(got.TLSNextProto) != 0 {
		t.Errorf("write transport TLSNextProto %v; want empty (no h2 upgrade)", got.TLSNextProto)
	}
	// guardOf finds the connection under TLS in TLS (an HTTPS proxy).
	g := &guardedConn{}
	inner := tls.Client(tls.Client(g, &tls.Config{}), &tls.Config{})
	if guardOf(inner) != g {
		t.Error("guardOf does not find the guarded connection under two TLS layers")
	}
}
