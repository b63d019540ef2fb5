package main

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// listener tracks the connections lis accepts, so that a standby can
// close the autoscaler's connection (see interceptor).
func (l *leadership) listener(lis net.Listener) net.Listener {
	if l == nil {
		return lis
	}
	return &trackingListener{Listener: lis, t: l.conns}
}

// interceptors are the gRPC interceptors of a replica with leader
// election: when a standby refuses Refresh, it also closes the
// connection the call came on, a second after the answer. The autoscaler
// abandons that loop; its gRPC client reconnects through the Service,
// which picks a replica anew, until it reaches the leader.
func (l *leadership) interceptors() []grpc.UnaryServerInterceptor {
	if l == nil {
		return nil
	}
	refresh := "/" + protos.CloudProvider_ServiceDesc.ServiceName + "/Refresh"
	return []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		res, err := handler(ctx, req)
		if err != nil && info.FullMethod == refresh {
			if p, ok := peer.FromContext(ctx); ok && !l.leads() {
				l.conns.closeLater(p.Addr.String(), time.Second)
			}
		}
		return res, err
	}}
}

// connTracker holds the accepted connections by remote address.
type connTracker struct {
	mu     sync.Mutex // guards conns and timers
	conns  map[string]net.Conn
	timers []*time.Timer
}

func (t *connTracker) closeLater(addr string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.conns[addr]
	if !ok {
		return
	}
	t.timers = append(t.timers, time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.conns, addr)
		t.mu.Unlock()
		_ = c.Close()
	}))
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tm := range t.timers {
		tm.Stop()
	}
	t.timers = nil
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	addr := c.RemoteAddr().String()
	l.t.mu.Lock()
	l.t.conns[addr] = c
	l.t.mu.Unlock()
	return &trackedConn{Conn: c, t: l.t, addr: addr}, nil
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	addr string
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	if c.t.conns[c.addr] == c.Conn {
		delete(c.t.conns, c.addr)
	}
	c.t.mu.Unlock()
	return c.Conn.Close()
}
