package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
)

// startHealth serves a health server with limits l on loopback.
func startHealth(t *testing.T, l externalgrpc.Limits) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	gs, limited := newHealthServer(lis, hs, l)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(limited)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

func dialHealth(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// watch opens a Watch stream and waits for its first answer.
func watch(t *testing.T, ctx context.Context, c healthpb.HealthClient) healthpb.Health_WatchClient {
	t.Helper()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("Watch first answer: %v", err)
	}
	return w
}

func TestHealthListenerLimits(t *testing.T) {
	t.Run("streams per connection", func(t *testing.T) {
		l := defaultHealthLimits
		l.MaxStreams = 2
		c := dialHealth(t, startHealth(t, l))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		first := watch(t, ctx, c)
		watch(t, ctx, c)

		short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancelShort()
		if _, err := c.Check(short, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("Check beyond %d streams: %v; want DeadlineExceeded (no stream slot)", l.MaxStreams, err)
		}
		_ = first.CloseSend()
		cancel()
		ok, cancelOK := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancelOK()
		if _, err := c.Check(ok, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("Check after the streams ended: %v", err)
		}
	})

	t.Run("connections", func(t *testing.T) {
		l := defaultHealthLimits
		l.MaxConns = 1
		addr := startHealth(t, l)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		watch(t, ctx, dialHealth(t, addr))

		second := dialHealth(t, addr)
		short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancelShort()
		if _, err := second.Check(short, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("Check on a connection beyond the limit of %d: %v; want DeadlineExceeded (not accepted)", l.MaxConns, err)
		}
	})

	t.Run("connection age", func(t *testing.T) {
		l := defaultHealthLimits
		l.MaxAge, l.MaxAgeGrace = 200*time.Millisecond, 100*time.Millisecond
		c := dialHealth(t, startHealth(t, l))
		w := watch(t, t.Context(), c)
		start := time.Now()
		_, err := w.Recv()
		if err == nil {
			t.Fatal("Watch stream got a second answer; want it cut off by the connection age")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Watch stream ended after %v; want about %v", took, l.MaxAge+l.MaxAgeGrace)
		}
	})

	t.Run("request size", func(t *testing.T) {
		c := dialHealth(t, startHealth(t, defaultHealthLimits))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		big := make([]byte, defaultHealthLimits.MaxRecvMsgSize+1)
		for i := range big {
			big[i] = 'a'
		}
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: string(big)}); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("Check with a %d-byte request: %v; want ResourceExhausted", len(big), err)
		}
	})
}
