package main

import (
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
)

// defaultHealthLimits bound what the plaintext --health-listen address,
// which anyone in the pod network may reach, can make the process hold.
// A kubelet probe is one Check per connection every few seconds;
// everything beyond that is refused or cut off. Watch streams are held
// at most maxAge plus its grace; the other values are those of the
// --listen address ([externalgrpc.DefaultLimits]) or smaller.
var defaultHealthLimits = externalgrpc.Limits{
	MaxConns:          32,
	MaxStreams:        4,
	MaxRecvMsgSize:    4 << 10,
	MaxHeaderListSize: 8 << 10,
	Window:            64 << 10,
	ReadBufferSize:    8 << 10,
	WriteBufferSize:   8 << 10,
	HandshakeTimeout:  10 * time.Second,
	MaxIdle:           time.Minute,
	MaxAge:            5 * time.Minute,
	MaxAgeGrace:       10 * time.Second,
	PingAfter:         time.Minute,
	PingTimeout:       20 * time.Second,
	MinPingInterval:   time.Minute,
}

// newHealthServer returns the gRPC server of the health listener, serving
// only the health service hs, and the listener to serve it on with the
// connection limit applied.
func newHealthServer(lis net.Listener, hs *health.Server, l externalgrpc.Limits) (*grpc.Server, net.Listener) {
	gs := grpc.NewServer(l.ServerOptions()...)
	healthpb.RegisterHealthServer(gs, hs)
	return gs, l.Listener(lis)
}
