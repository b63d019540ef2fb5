package unarygrpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestCalls(t *testing.T) {
	srvTLS, clientCreds := testTLS(t)
	for _, tc := range []struct {
		name  string
		tls   bool
		creds credentials.TransportCredentials
	}{{"plaintext", false, nil}, {"tls", true, clientCreds}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srvTLS
			if !tc.tls {
				cfg = nil
			}
			_, addr, _ := newTestServer(t, cfg)
			cc := dial(t, addr, tc.creds)
			for _, m := range []string{inlineMethod, spawnedMethod} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				out, err := call(ctx, cc, m, []byte("echo"))
				if err != nil || string(out) != "echo" {
					t.Fatalf("%s: echo answered %q, %v", m, out, err)
				}

				ctx = metadata.AppendToOutgoingContext(ctx, "x-key", "v1", "x-key", "v2", "x-bin-bin", "\x00\xff")
				out, err = call(ctx, cc, m, []byte("p"))
				if err != nil {
					t.Fatalf("%s: %v", m, err)
				}
				want := `addr=true x-key=["v1" "v2"] x-bin-bin=["\x00\xff"] deadline=true`
				if tc.tls {
					want = "addr=true tls=h2 " + want[len("addr=true "):]
				}
				if string(out) != want {
					t.Errorf("%s: handler saw %s, want %s", m, out, want)
				}

				_, err = call(ctx, cc, m, []byte("x"))
				st := status.Convert(err)
				if st.Code() != codes.FailedPrecondition || st.Message() != "pool \"α\" is 100% full\nsecond line" {
					t.Errorf("%s: error %v (code %v, message %q)", m, err, st.Code(), st.Message())
				}
				if d := st.Details(); len(d) != 1 || d[0].(*durationpb.Duration).AsDuration() != 3*time.Second {
					t.Errorf("%s: details %v", m, d)
				}
				if _, err := call(ctx, cc, m, []byte("d")); status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("%s: a bare context.DeadlineExceeded answered %v", m, err)
				}
			}
		})
	}
}

func TestUnknownAndStreamingMethods(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []string{"/" + testService + "/Nope", "/other.Service/Inline"} {
		if _, err := call(ctx, cc, m, []byte("e")); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %v, want Unimplemented naming the method", m, err)
		}
	}
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+testService+"/Watch")
	if err == nil {
		err = stream.SendMsg(&healthpb.HealthCheckRequest{})
	}
	if err == nil {
		err = stream.RecvMsg(new(healthpb.HealthCheckResponse))
	}
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "streaming") {
		t.Errorf("streaming method: %v, want Unimplemented saying only unary calls are served", err)
	}
}

// Answers larger than the client's windows, requests larger than the
// server's, and a request over the size limit.
func TestLargeMessages(t *testing.T) {
	_, addr, _ := newTestServer(t, nil, WithMaxRecvMsgSize(3<<20))
	cc := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range []string{inlineMethod, spawnedMethod} {
		for _, n := range []int{0, 16<<10 - 5, 16 << 10, 70 << 10, 2 << 20} {
			req := bigReq(1, n)
			out, err := call(ctx, cc, m, req)
			if err != nil {
				t.Fatalf("%s: answer of %d bytes: %v", m, n, err)
			}
			if err := checkBig(req, out, n); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
		big := append([]byte{'e'}, bytes.Repeat([]byte("0123456789"), 250_000)...) // 2.5 MB, over the 1 MiB stream window
		out, err := call(ctx, cc, m, big)
		if err != nil || !bytes.Equal(out, big) {
			t.Fatalf("%s: echo of %d bytes: %d bytes, %v", m, len(big), len(out), err)
		}
		tooBig := make([]byte, 3<<20+1)
		tooBig[0] = 'e'
		if _, err := call(ctx, cc, m, tooBig); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s: request over the limit: %v, want ResourceExhausted", m, err)
		}
		// The connection still serves.
		if out, err := call(ctx, cc, m, []byte("e")); err != nil || string(out) != "e" {
			t.Fatalf("%s: after the refused request: %q, %v", m, out, err)
		}
	}
}

// A client's deadline and cancellation reach the handler's context.
func TestDeadlineAndCancel(t *testing.T) {
	s, addr, _ := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := call(ctx, cc, spawnedMethod, []byte("w"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("waiting call with a deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deadline of 100ms ended the call after %v", d)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := call(cctx, cc, spawnedMethod, []byte("w")); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	ccancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	waitStreams(t, s.openStreams, 0)
}

// A call's context ends once the call is answered, inline or not, with
// a deadline or without one.
func TestCallContextEndsAfterAnswer(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	for _, m := range []string{inlineMethod, spawnedMethod} {
		for _, timeout := range []time.Duration{0, time.Hour} {
			ctx := context.Background()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			if _, err := call(ctx, cc, m, []byte("k")); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			hctx := <-kept
			if _, ok := hctx.Deadline(); ok != (timeout > 0) {
				t.Errorf("%s, timeout %v: the handler's context has a deadline: %v", m, timeout, ok)
			}
			select {
			case <-hctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("%s, timeout %v: the handler's context did not end after the answer", m, timeout)
			}
			if !errors.Is(hctx.Err(), context.Canceled) {
				t.Errorf("%s, timeout %v: the handler's context ended with %v, want Canceled", m, timeout, hctx.Err())
			}
		}
	}
}

// TestRandomInterleavings runs many clients over a few connections, each
// making random calls (inline or not, small or beyond the windows,
// cancelled at a random moment or not) with the race detector on. The
// invariant: every call that is not cancelled gets its own answer, every
// cancelled one gets its own answer or Canceled/DeadlineExceeded, and when
// all are done no stream is left open on the server.
func TestRandomInterleavings(t *testing.T) {
	s, addr, _ := newTestServer(t, nil)
	conns := []*grpc.ClientConn{dial(t, addr, nil), dial(t, addr, nil), dial(t, addr, nil)}
	for round := range 5 {
		seed := uint64(time.Now().UnixNano())
		t.Logf("round %d seed %d", round, seed)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 12 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(w)))
				for i := range 40 {
					cc := conns[r.IntN(len(conns))]
					m := inlineMethod
					if r.IntN(2) == 0 {
						m = spawnedMethod
					}
					var req []byte
					n := 0
					switch r.IntN(4) {
					case 0:
						n = r.IntN(300 << 10)
						req = bigReq(byte(i), n)
					case 1:
						req = []byte(fmt.Sprintf("e%d-%d-%d", w, i, r.Uint64()))
					case 2:
						req, m = []byte("w"), spawnedMethod // an inline method never waits
					default:
						req = append([]byte{'e'}, bytes.Repeat([]byte{byte(w)}, r.IntN(200<<10))...)
					}
					// A deadline, so that a hang fails the test instead of stalling it.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					cancelled := req[0] == 'w' || r.IntN(3) == 0
					if cancelled {
						time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, cancel)
					}
					out, err := call(ctx, cc, m, req)
					cancel()
					switch {
					case err != nil && cancelled && status.Code(err) == codes.Canceled:
					case err != nil:
						errs <- fmt.Errorf("%s %q…: %v", m, req[:min(len(req), 12)], err)
						return
					case req[0] == 'b':
						if err := checkBig(req, out, n); err != nil {
							errs <- fmt.Errorf("%s: %v", m, err)
							return
						}
					case !bytes.Equal(out, req):
						errs <- fmt.Errorf("%s: answer of %d bytes for a request of %d (%q…)", m, len(out), len(req), out[:min(len(out), 12)])
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		waitStreams(t, s.openStreams, 0)
	}
}

// openStreams counts the streams open on the server's connections.
func (s *Server) openStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.mu.Lock()
		n += len(c.streams)
		c.mu.Unlock()
	}
	return n
}

// busyStreams counts the streams open or with a handler running.
func (s *Server) busyStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.mu.Lock()
		n += c.busy
		c.mu.Unlock()
	}
	return n
}

func waitStreams(t *testing.T, count func() int, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, want %d", count(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGracefulStop(t *testing.T) {
	s, addr, served := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, cc, inlineMethod, []byte("e")); err != nil {
		t.Fatal(err)
	}
	// A call in progress: it ends when its context does.
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer wcancel()
	waited := make(chan error, 1)
	go func() { _, err := call(wctx, cc, spawnedMethod, []byte("w")); waited <- err }()
	waitStreams(t, s.openStreams, 1)

	stopped := make(chan struct{})
	start := time.Now()
	go func() { s.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in progress")
	case <-time.After(200 * time.Millisecond):
	}
	if err := <-waited; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call in progress: %v, want its own deadline", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop did not return after the last call")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("GracefulStop returned after %v, before the call's deadline", d)
	}
	if err := <-served; !errors.Is(err, ErrServerStopped) {
		t.Errorf("Serve returned %v", err)
	}
	fctx, fcancel := context.WithTimeout(ctx, time.Second)
	defer fcancel()
	if _, err := call(fctx, cc, inlineMethod, []byte("e")); err == nil {
		t.Error("a call after GracefulStop was answered")
	}
}

func TestStopCancelsCalls(t *testing.T) {
	s, addr, served := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	errc := make(chan error, 1)
	go func() { _, err := call(context.Background(), cc, spawnedMethod, []byte("w")); errc <- err }()
	waitStreams(t, s.openStreams, 1)
	s.Stop()
	select {
	case err := <-errc:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("call cut by Stop: %v, want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop left the call waiting")
	}
	if err := <-served; !errors.Is(err, ErrServerStopped) {
		t.Errorf("Serve returned %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(lis); !errors.Is(err, ErrServerStopped) {
		t.Errorf("Serve after Stop: %v", err)
	}
}

func TestInterceptorsRunInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	mk := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			mu.Lock()
			seen = append(seen, name+" "+info.FullMethod)
			mu.Unlock()
			return h(ctx, req)
		}
	}
	_, addr, _ := newTestServer(t, nil, WithInterceptors(mk("a"), mk("b"), mk("c")))
	cc := dial(t, addr, nil)
	if _, err := call(context.Background(), cc, inlineMethod, []byte("e")); err != nil {
		t.Fatal(err)
	}
	want := "a " + inlineMethod + ",b " + inlineMethod + ",c " + inlineMethod
	if got := strings.Join(seen, ","); got != want {
		t.Errorf("interceptors ran as %s, want %s", got, want)
	}
}

func TestTLSWithoutH2IsRefused(t *testing.T) {
	srvTLS, _ := testTLS(t)
	_, addr, _ := newTestServer(t, srvTLS)
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // only the protocol is tested
	if err != nil && !strings.Contains(err.Error(), "no application protocol") {
		t.Logf("handshake: %v", err)
	}
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err == nil {
			buf := make([]byte, 1)
			if _, err := c.Read(buf); err == nil {
				t.Fatal("a TLS client without h2 was served")
			}
		}
	}
}

func TestRegisterServiceChecksTheImplementation(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("RegisterService took an implementation of the wrong type")
		}
	}()
	NewServer().RegisterService(&testDesc, struct{}{})
}

// grpc-go's client pings after every answer whose PING is not pending
// (bandwidth estimation). With the acknowledgements held back for
// pingAckDelay, a run of calls brings one PING per pingAckDelay, not one
// per call, and the server is not woken twice per call.
func TestFewPingsPerCall(t *testing.T) {
	s, addr, _ := newTestServer(t, nil)
	cc := dial(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const calls = 2000
	start := time.Now()
	for i := range calls {
		if _, err := call(ctx, cc, inlineMethod, []byte("e")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	s.mu.Lock()
	pings := 0
	for c := range s.conns {
		c.wmu.Lock()
		pings += c.pingsIn
		c.wmu.Unlock()
	}
	s.mu.Unlock()
	// One PING per pingAckDelay, plus the first, plus slack for a slow
	// machine; acknowledged at once it would be one per call.
	if limit := 2*int(elapsed/pingAckDelay) + 10; pings > limit || pings > calls/4 {
		t.Errorf("%d PINGs for %d calls in %v; want at most %d", pings, calls, elapsed, min(limit, calls/4))
	}
	t.Logf("%d PINGs for %d calls in %v", pings, calls, elapsed)
}

// A PING is acknowledged within pingAckDelay even when no answer follows.
func TestPingAcknowledgedWithoutCalls(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)
	c := newRawClient(t, addr)
	for i := range 3 {
		data := [8]byte{byte(i)}
		start := time.Now()
		if err := c.fr.WritePing(false, data); err != nil {
			t.Fatal(err)
		}
		f := c.until("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
		if f.(*http2.PingFrame).Data != data {
			t.Errorf("ack of %v, want %v", f.(*http2.PingFrame).Data, data)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("PING acknowledged after %v", d)
		}
	}
	// A burst is acknowledged at once, in order.
	for i := range maxPendingPings {
		_ = c.fr.WritePing(false, [8]byte{9, byte(i)})
	}
	for i := range maxPendingPings {
		f := c.until("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
		if want := [8]byte{9, byte(i)}; f.(*http2.PingFrame).Data != want {
			t.Errorf("ack %d of the burst is %v, want %v", i, f.(*http2.PingFrame).Data, want)
		}
	}
}
