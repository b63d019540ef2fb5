package main

import (
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// healthLimits bound what the plaintext --health-listen address, which
// anyone in the pod network may reach, can make the process hold. A
// kubelet probe is one Check per connection every few seconds; everything
// beyond that is refused or cut off.
type healthLimits struct {
	// maxConns is the number of connections served at once; more wait
	// in the listen backlog.
	maxConns int
	// maxStreams is the number of concurrent calls (and Watch streams)
	// per connection; more wait for a slot.
	maxStreams uint32
	// maxAge closes a connection after this long, after a grace for the
	// calls it carries, so a Watch stream cannot hold a slot for ever.
	maxAge, maxAgeGrace time.Duration
	// maxIdle closes a connection without calls.
	maxIdle time.Duration
	// minPing is the shortest keepalive ping interval a client may use;
	// faster pings, or pings without calls, close the connection.
	minPing time.Duration
	// maxRecv bounds a request message.
	maxRecv int
}

var defaultHealthLimits = healthLimits{
	maxConns:    32,
	maxStreams:  4,
	maxAge:      5 * time.Minute,
	maxAgeGrace: 10 * time.Second,
	maxIdle:     time.Minute,
	minPing:     time.Minute,
	maxRecv:     4 << 10,
}

// newHealthServer returns the gRPC server of the health listener, serving
// only the health service hs, and the listener to serve it on with the
// connection limit applied.
func newHealthServer(lis net.Listener, hs *health.Server, l healthLimits) (*grpc.Server, net.Listener) {
	gs := grpc.NewServer(
		grpc.MaxConcurrentStreams(l.maxStreams),
		grpc.MaxRecvMsgSize(l.maxRecv),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.maxIdle,
			MaxConnectionAge:      l.maxAge,
			MaxConnectionAgeGrace: l.maxAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.minPing}),
	)
	healthpb.RegisterHealthServer(gs, hs)
	return gs, netutil.LimitListener(lis, l.maxConns)
}
