package externalgrpc_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// TestMutualTLS runs the server with ServerTLSConfig and checks that only
// a client with a certificate of the configured CA gets an answer.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	serverTLS, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, p.caFile)
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	e := newEnv(t, envOptions{serverTLS: serverTLS, clientTLS: p.clientTLS(true)})

	// The autoscaler's own client: CA bundle, client certificate and key.
	res, err := e.client.NodeGroups(e.ctx(), &protos.NodeGroupsRequest{})
	if err != nil || len(res.GetNodeGroups()) != 3 {
		t.Fatalf("NodeGroups with a client certificate = %d groups, %v; want 3, nil", len(res.GetNodeGroups()), err)
	}
	if _, err := e.client.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize with a client certificate: %v", err)
	}

	other := newPKI(t) // a CA the server does not trust
	foreign := p.clientTLS(false)
	foreign.Certificates = []tls.Certificate{other.clientPair}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no client certificate", p.clientTLS(false)},
		{"client certificate of another CA", foreign},
		{"plaintext", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial(tc.cfg)
			_, err := c.NodeGroupIncreaseSize(e.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1})
			if got := status.Code(err); got != codes.Unavailable {
				t.Errorf("NodeGroupIncreaseSize: code %s (%v); want Unavailable (connection refused by the handshake)", got, err)
			}
		})
	}
	if got := e.targetSize("workers"); got != 1 {
		t.Errorf("target size = %d; want 1: only the authenticated increase may count", got)
	}
}

func TestServerTLSConfigErrors(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(p.dir, "missing.crt")
	notPEM := filepath.Join(p.dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		cert, key, ca  string
		wantSubstrings []string
	}{
		{"nothing set", "", "", "", []string{"certificate file is not set", "key file is not set", "client CA file is not set"}},
		{"client CA missing", p.serverCert, p.serverKey, "", []string{"client CA file is not set"}},
		{"certificate file does not exist", missing, p.serverKey, p.caFile, []string{"missing.crt"}},
		{"key does not match", p.serverCert, p.clientKey, p.caFile, []string{"server certificate", "private key does not match"}},
		{"client CA is not PEM", p.serverCert, p.serverKey, notPEM, []string{"no PEM certificate found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := externalgrpc.ServerTLSConfig(tc.cert, tc.key, tc.ca)
			if err == nil {
				t.Fatalf("ServerTLSConfig = %v, nil; want an error", cfg)
			}
			for _, want := range tc.wantSubstrings {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestServerTLSConfigReload renews the server certificate on disk, as
// cert-manager does in a mounted Secret, and checks that the next
// handshake presents the new one, and that a broken renewal keeps the
// last good certificate.
func TestServerTLSConfigReload(t *testing.T) {
	p := newPKI(t)
	cfg, err := externalgrpc.ServerTLSConfig(p.serverCert, p.serverKey, p.caFile)
	if err != nil {
		t.Fatalf("ServerTLSConfig: %v", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = io.Copy(io.Discard, c) // until the client closes
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), p.clientTLS(true))
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	// touch moves the modification time on, in case the file system's
	// time resolution is coarse.
	touch := func(name string, d time.Duration) {
		t.Helper()
		at := time.Now().Add(d)
		if err := os.Chtimes(name, at, at); err != nil {
			t.Fatal(err)
		}
	}

	first := serial()
	p.issue(t, "server", x509.ExtKeyUsageServerAuth)
	touch(p.serverCert, time.Minute)
	touch(p.serverKey, time.Minute)
	second := serial()
	if second == first {
		t.Fatalf("serial after renewal = %s; want a new certificate", second)
	}
	if err := os.WriteFile(p.serverKey, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	touch(p.serverKey, 2*time.Minute)
	if got := serial(); got != second {
		t.Errorf("serial after a broken renewal = %s; want the last good one %s", got, second)
	}
}
