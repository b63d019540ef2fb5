package externalgrpc

import (
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bound what the clients of a gRPC listener can make the process
// hold, with grpc-go's own settings and a cap on accepted connections.
// [DefaultLimits] are chosen for the autoscaler's client; the package
// documentation says why each value is what it is.
type Limits struct {
	// MaxConns is the number of connections served at once; further ones
	// wait in the listen backlog until one closes ([Limits.Listener]).
	MaxConns int
	// MaxStreams is the number of calls in progress per connection
	// (SETTINGS_MAX_CONCURRENT_STREAMS); a client's further calls wait
	// for a slot, and grpc-go reads no new stream past it.
	MaxStreams uint32
	// MaxRecvMsgSize bounds a request message; a larger one ends its call
	// with ResourceExhausted.
	MaxRecvMsgSize int
	// MaxHeaderListSize bounds a request's header block, CONTINUATION
	// frames included; a larger one ends the connection.
	MaxHeaderListSize uint32
	// Window is the HTTP/2 receive window of each stream and of each
	// connection. Setting it turns off grpc-go's dynamic windows, which
	// would let a client send up to 16 MiB ahead.
	Window int32
	// ReadBufferSize and WriteBufferSize are the buffers of each
	// connection; grpc-go takes the write buffer from a shared pool for
	// each write and gives it back after it, so an idle connection holds
	// none.
	ReadBufferSize, WriteBufferSize int
	// HandshakeTimeout bounds a new connection's TLS handshake and the
	// client's HTTP/2 preface; a connection that has not done both in
	// time is closed.
	HandshakeTimeout time.Duration
	// MaxIdle closes a connection that carried no call for this long.
	MaxIdle time.Duration
	// MaxAge sends a connection GOAWAY after this long, and MaxAgeGrace
	// later closes it with whatever calls it still carries.
	MaxAge, MaxAgeGrace time.Duration
	// PingAfter is how long a connection may go without a frame from
	// the client before the server pings it; PingTimeout closes the
	// connection if the answer does not come in time.
	PingAfter, PingTimeout time.Duration
	// MinPingInterval is the shortest interval between the client's
	// pings while it has calls in progress; without calls, pings are not
	// allowed. More than two pings against this end the connection
	// (GOAWAY ENHANCE_YOUR_CALM); pings that follow an answer do not
	// count.
	MinPingInterval time.Duration
}

// DefaultLimits are the limits of serve's --listen address, chosen for
// the autoscaler's externalgrpc client (see the package documentation).
var DefaultLimits = Limits{
	MaxConns:          8,
	MaxStreams:        16,
	MaxRecvMsgSize:    1 << 20,
	MaxHeaderListSize: 16 << 10,
	Window:            64 << 10,
	ReadBufferSize:    32 << 10,
	WriteBufferSize:   32 << 10,
	HandshakeTimeout:  10 * time.Second,
	MaxIdle:           2 * time.Minute,
	MaxAge:            30 * time.Minute,
	MaxAgeGrace:       10 * time.Second,
	PingAfter:         time.Minute,
	PingTimeout:       20 * time.Second,
	MinPingInterval:   time.Minute,
}

// ServerOptions are the grpc.ServerOptions that apply l; zero fields keep
// grpc-go's defaults.
func (l Limits) ServerOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	add := func(set bool, o grpc.ServerOption) {
		if set {
			opts = append(opts, o)
		}
	}
	add(l.MaxStreams > 0, grpc.MaxConcurrentStreams(l.MaxStreams))
	add(l.MaxRecvMsgSize > 0, grpc.MaxRecvMsgSize(l.MaxRecvMsgSize))
	add(l.MaxHeaderListSize > 0, grpc.MaxHeaderListSize(l.MaxHeaderListSize))
	add(l.Window > 0, grpc.InitialWindowSize(l.Window))
	add(l.Window > 0, grpc.InitialConnWindowSize(l.Window))
	add(l.ReadBufferSize > 0, grpc.ReadBufferSize(l.ReadBufferSize))
	add(l.WriteBufferSize > 0, grpc.WriteBufferSize(l.WriteBufferSize))
	add(l.HandshakeTimeout > 0, grpc.ConnectionTimeout(l.HandshakeTimeout))
	opts = append(opts,
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.MaxIdle,
			MaxConnectionAge:      l.MaxAge,
			MaxConnectionAgeGrace: l.MaxAgeGrace,
			Time:                  l.PingAfter,
			Timeout:               l.PingTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.MinPingInterval}),
	)
	return opts
}

// Listener returns lis with at most l.MaxConns connections accepted and
// open at once (lis itself without a limit).
func (l Limits) Listener(lis net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return lis
	}
	return netutil.LimitListener(lis, l.MaxConns)
}
