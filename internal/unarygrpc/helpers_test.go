package unarygrpc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service has two unary methods with the same handler, Inline
// (run on the connection's reader) and Spawned (on its own goroutine),
// and a streaming method. A request is a BytesValue whose first byte
// says what to do:
//
//	'e' answer the request as it is
//	'b' answer 5+n bytes, n the big-endian uint32 after the op (the
//	    answer starts with the request's first five bytes)
//	'w' wait until the call's context ends, answer its error's status
//	    (Inline refuses: an inline method must not wait)
//	'x' answer an error with a message and details
//	'd' answer context.DeadlineExceeded as it is
//	'p' answer the peer, TLS and metadata the handler sees
//	'h' hold until holdGate is closed, whatever the context says
//	    (Inline refuses), counting the handlers holding in holding
//	'k' hand the call's context to kept and answer the request
const testService = "unarygrpc.test.Echo"

var (
	holdGate = make(chan struct{}) // replaced by tests that hold handlers
	holding  atomic.Int64
	held     atomic.Int64 // the most handlers holding at once
	kept     = make(chan context.Context, 1)
)

type echoServer interface{ echo() }

type echoImpl struct{}

func (echoImpl) echo() {}

// maxBig bounds the answers of op 'b'.
const maxBig = 8 << 20

func echoHandler(ctx context.Context, req *wrapperspb.BytesValue, inline bool) (*wrapperspb.BytesValue, error) {
	v := req.GetValue()
	if len(v) == 0 {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if inline && (v[0] == 'w' || v[0] == 'h') {
		return nil, status.Error(codes.InvalidArgument, "an inline method never waits")
	}
	if v[0] == 'b' && (len(v) < 5 || binary.BigEndian.Uint32(v[1:5]) > maxBig) {
		return nil, status.Error(codes.InvalidArgument, "op b takes a size of at most 8 MiB")
	}
	switch v[0] {
	case 'e':
		return req, nil
	case 'b':
		n := binary.BigEndian.Uint32(v[1:5])
		out := make([]byte, 5+n)
		copy(out, v[:5])
		for i := 5; i < len(out); i++ {
			out[i] = byte(i)
		}
		return wrapperspb.Bytes(out), nil
	case 'w':
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case 'h':
		n := holding.Add(1)
		for {
			m := held.Load()
			if n <= m || held.CompareAndSwap(m, n) {
				break
			}
		}
		<-holdGate
		holding.Add(-1)
		return req, nil
	case 'd':
		return nil, context.DeadlineExceeded // a bare context error, not a status
	case 'k':
		kept <- ctx
		return req, nil
	case 'x':
		st, _ := status.New(codes.FailedPrecondition, "pool \"α\" is 100% full\nsecond line").WithDetails(durationpb.New(3 * time.Second))
		return nil, st.Err()
	case 'p':
		var b bytes.Buffer
		if p, ok := peer.FromContext(ctx); ok {
			fmt.Fprintf(&b, "addr=%v ", p.Addr != nil)
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				fmt.Fprintf(&b, "tls=%s ", ti.State.NegotiatedProtocol)
			}
		}
		md, _ := metadata.FromIncomingContext(ctx)
		fmt.Fprintf(&b, "x-key=%q x-bin-bin=%q", md.Get("x-key"), md.Get("x-bin-bin"))
		if d, ok := ctx.Deadline(); ok {
			fmt.Fprintf(&b, " deadline=%v", time.Until(d) > 0)
		}
		return wrapperspb.Bytes(b.Bytes()), nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "unknown op %q", v[0])
}

func echoMethod(name string) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		inline := name == "Inline"
		if interceptor == nil {
			return echoHandler(ctx, in, inline)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + testService + "/" + name}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return echoHandler(ctx, req.(*wrapperspb.BytesValue), inline)
		})
	}}
}

var testDesc = grpc.ServiceDesc{
	ServiceName: testService,
	HandlerType: (*echoServer)(nil),
	Methods:     []grpc.MethodDesc{echoMethod("Inline"), echoMethod("Spawned")},
	Streams:     []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: func(any, grpc.ServerStream) error { return nil }}},
}

const (
	inlineMethod  = "/" + testService + "/Inline"
	spawnedMethod = "/" + testService + "/Spawned"
)

// newTestServer serves the test service on loopback; tlsCfg nil means
// plaintext. It returns the server and its address; the server stops at
// the end of the test.
func newTestServer(t testing.TB, tlsCfg *tls.Config, opts ...Option) (*Server, string, <-chan error) {
	t.Helper()
	opts = append([]Option{WithTLS(tlsCfg), WithInline(func(m string) bool { return m == inlineMethod })}, opts...)
	s := NewServer(opts...)
	s.RegisterService(&testDesc, echoImpl{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return s, lis.Addr().String(), served
}

func dial(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func call(ctx context.Context, cc *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	err := cc.Invoke(ctx, method, wrapperspb.Bytes(req), out)
	return out.GetValue(), err
}

// testTLS returns a server configuration with a self-signed certificate
// for 127.0.0.1 and client credentials trusting it.
func testTLS(t testing.TB) (*tls.Config, credentials.TransportCredentials) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "unarygrpc test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	return srv, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
}

// bigReq asks for an answer of 5+n bytes, tagged with tag.
func bigReq(tag byte, n int) []byte {
	b := []byte{'b', 0, 0, 0, 0, tag}
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	return b
}

// checkBig reports whether out is the answer to bigReq(_, n).
func checkBig(req, out []byte, n int) error {
	if len(out) != 5+n {
		return fmt.Errorf("answer of %d bytes, want %d", len(out), 5+n)
	}
	if !bytes.Equal(out[:5], req[:5]) {
		return fmt.Errorf("answer starts %x, want %x", out[:5], req[:5])
	}
	for i := 5; i < len(out); i++ {
		if out[i] != byte(i) {
			return fmt.Errorf("byte %d of the answer is %d", i, out[i])
		}
	}
	return nil
}
