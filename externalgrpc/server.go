package externalgrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/pool"
)

// GPULabel is the node label the autoscaler reads to tell GPU nodes apart,
// the one the autoscaler's built-in Hetzner provider reports.
const GPULabel = "hcloud/gpu-node"

// DefaultCallTimeout bounds the work of one call. The autoscaler gives
// every call 5 s (grpc_timeout); answering with our own error a second
// earlier puts a clear message into its log instead of a bare
// DeadlineExceeded.
const DefaultCallTimeout = 4 * time.Second

// Server answers the autoscaler's CloudProvider service over a Cluster.
// Register it with [protos.RegisterCloudProviderServer]. Its methods are
// safe for concurrent use; it holds no state of its own besides its
// metrics, so the Cluster's pools decide every answer.
type Server struct {
	// Embedded only so that RPCs added to the protocol later answer
	// Unimplemented instead of breaking the build; all current RPCs are
	// implemented below.
	protos.UnimplementedCloudProviderServer

	cluster     *hcloudscale.Cluster
	log         *zap.Logger
	callTimeout time.Duration
	metrics     *rpcMetrics
	tls         *tlsMetrics
	handshakes  *handshakeLog
	gate        Gate // nil: every call may change the cluster
	// groups holds, per pool name, the parts of answers that change only
	// with the Cluster's configuration: rebuilt when its generation moves.
	groups  atomic.Pointer[groupSet]
	groupMu sync.Mutex // serialises rebuilds of groups
}

// groupSet is the Server's view of the Cluster's pools at one generation.
type groupSet struct {
	generation uint64
	byName     map[string]*group
}

// group is what the Server keeps of one pool.
type group struct {
	pool *pool.Pool
	// debug is the NodeGroup's debug string.
	debug string
	// noOptions is NodeGroupGetOptions' Unimplemented answer for a pool
	// without autoscaling options, built once: the autoscaler asks for it
	// twice per node and loop.
	noOptions error
	// options: the pool sets autoscaling options.
	options bool
}

var _ protos.CloudProviderServer = (*Server)(nil)

// Option configures [NewServer].
type Option func(*options)

type options struct {
	logger      *zap.Logger
	registerer  prometheus.Registerer
	callTimeout time.Duration
	gate        Gate
}

// WithLogger sets the logger; the server logs as "externalgrpc". The
// default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithRegisterer registers the RPC metrics of [Server.UnaryInterceptor]
// (hcloudscale_externalgrpc_requests_total and
// hcloudscale_externalgrpc_request_duration_seconds) and the TLS metrics
// of [Server.ServerOptions] (hcloudscale_tls_handshake_failures_total by
// reason and hcloudscale_tls_certificate_expiry_timestamp_seconds by cert,
// server or client) with reg. A second Server on the same registerer
// reuses them.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithCallTimeout bounds the work of one call ([DefaultCallTimeout]). Keep
// it below the autoscaler's grpc_timeout. A call whose own deadline is
// nearer keeps that deadline, less a small margin for the answer.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.callTimeout = d
		}
	}
}

// NewServer returns a Server over cluster. It does no I/O. Pools that set
// autoscaling options are logged with a warning, because answering
// NodeGroupGetOptions for them changes how the autoscaler counts their
// unready nodes (see the package documentation).
func NewServer(cluster *hcloudscale.Cluster, opts ...Option) *Server {
	o := options{logger: zap.NewNop(), callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	s := &Server{
		cluster:     cluster,
		log:         o.logger.Named("externalgrpc"),
		callTimeout: o.callTimeout,
		metrics:     newRPCMetrics(o.registerer),
		tls:         newTLSMetrics(o.registerer),
		gate:        o.gate,
	}
	s.handshakes = newHandshakeLog(s.log)
	s.groupSet()
	return s
}

// groupSet returns the groups of the Cluster's current generation,
// rebuilding them after a change of its configuration. Pools that set
// autoscaling options are logged with a warning when they first do.
func (s *Server) groupSet() *groupSet {
	gen := s.cluster.Generation()
	if gs := s.groups.Load(); gs != nil && gs.generation == gen {
		return gs
	}
	s.groupMu.Lock()
	defer s.groupMu.Unlock()
	old := s.groups.Load()
	if old != nil && old.generation == gen {
		return old
	}
	// The pools are read after the generation: a change in between is
	// rebuilt again at the next call.
	gs := &groupSet{generation: gen, byName: map[string]*group{}}
	for _, p := range s.cluster.Pools() {
		cfg := p.Config()
		gs.byName[p.Name()] = &group{
			pool:      p,
			debug:     fmt.Sprintf("%s (%s in %s, min %d, max %d)", cfg.Name, cfg.ServerType, cfg.Location, p.MinSize(), p.MaxSize()),
			noOptions: status.Errorf(codes.Unimplemented, "node group %q sets no autoscaling options; the autoscaler's defaults apply", p.Name()),
			options:   cfg.Autoscaling != nil,
		}
		if cfg.Autoscaling != nil && (old == nil || old.byName[p.Name()] == nil || !old.byName[p.Name()].options) {
			s.log.Warn("pool sets autoscaling options, so NodeGroupGetOptions answers for it: "+
				"Cluster Autoscaler 1.35 and later then use a max node startup time of 0 for the pool "+
				"(unready nodes count as unready at once) and ignore maxNodeStartupTime and allowNonAtomicScaleUpToMax",
				zap.String("pool", p.Name()))
		}
	}
	s.groups.Store(gs)
	return gs
}

// group returns the group of the pool named name, or nil.
func (s *Server) group(name string) *group { return s.groupSet().byName[name] }

// answerMargin is kept free of a caller's deadline for sending the answer.
const answerMargin = 250 * time.Millisecond

// bound limits ctx to the call timeout and to the caller's deadline less
// answerMargin.
func (s *Server) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.callTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-answerMargin)
	}
	return context.WithTimeout(ctx, d)
}

// NodeGroups lists the pools in configuration order, then the pools
// removed from the configuration that still have nodes (min and max size
// 0, see [hcloudscale.Cluster.Reconfigure]). The autoscaler calls it after
// every Refresh, which applies a changed configuration file.
func (s *Server) NodeGroups(_ context.Context, _ *protos.NodeGroupsRequest) (*protos.NodeGroupsResponse, error) {
	pools := s.cluster.Pools()
	out := make([]*protos.NodeGroup, 0, len(pools))
	for _, p := range pools {
		out = append(out, s.nodeGroup(p))
	}
	return &protos.NodeGroupsResponse{NodeGroups: out}, nil
}

// nodeGroup describes a pool. The debug string changes only with the
// configuration: the autoscaler keeps it for a whole loop.
func (s *Server) nodeGroup(p *pool.Pool) *protos.NodeGroup {
	debug := ""
	if g := s.group(p.Name()); g != nil {
		debug = g.debug
	}
	return &protos.NodeGroup{
		Id:      p.Name(),
		MinSize: clampInt32(p.MinSize()),
		MaxSize: clampInt32(p.MaxSize()),
		Debug:   debug,
	}
}

// NodeGroupForNode names the pool of a node, from memory. A node of no
// pool (control plane, Robot servers, other clusters) gets a NodeGroup
// with an empty id, which the autoscaler reads as "not autoscaled".
//
// Besides what [hcloudscale.Cluster.PoolForNode] finds, the autoscaler's
// template nodes (label cluster-autoscaler.kubernetes.io/template-node=true)
// are routed by [hcloudscale.Cluster.PoolForTemplateNode]: by their
// hcloud/node-group label or the group in their name, also when they are
// copies of a real node whose server is gone.
func (s *Server) NodeGroupForNode(_ context.Context, req *protos.NodeGroupForNodeRequest) (*protos.NodeGroupForNodeResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "node is missing")
	}
	p := s.cluster.PoolForNode(n.GetProviderID(), n.GetName())
	if p == nil {
		p = s.cluster.PoolForTemplateNode(n.GetName(), n.GetLabels())
	}
	if p == nil {
		return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{}}, nil
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: s.nodeGroup(p)}, nil
}

// GPULabel returns [GPULabel].
func (s *Server) GPULabel(context.Context, *protos.GPULabelRequest) (*protos.GPULabelResponse, error) {
	return &protos.GPULabelResponse{Label: GPULabel}, nil
}

// GetAvailableGPUTypes returns no GPU types: Hetzner Cloud offers no GPU
// server types. An error would make the autoscaler ask again on every
// call; an empty answer is cached.
func (s *Server) GetAvailableGPUTypes(context.Context, *protos.GetAvailableGPUTypesRequest) (*protos.GetAvailableGPUTypesResponse, error) {
	return &protos.GetAvailableGPUTypesResponse{GpuTypes: map[string]*anypb.Any{}}, nil
}

// Cleanup does nothing. The autoscaler calls it when it exits, but the
// server outlives autoscaler restarts: closing the Cluster here would stop
// scale-ups in flight. The process that owns the Cluster closes it.
func (s *Server) Cleanup(context.Context, *protos.CleanupRequest) (*protos.CleanupResponse, error) {
	return &protos.CleanupResponse{}, nil
}

// Refresh brings the server listing up to date when its TTL has passed
// (no request otherwise). A listing that does not finish within the call
// timeout goes on in the background and the call succeeds with the last
// listing, because an error aborts the autoscaler's loop. A failed
// listing is an error (Unavailable): the API is not usable, so creates
// and deletes would fail too. A [Gate] that refuses makes it Unavailable
// as well (see [WithGate]).
func (s *Server) Refresh(ctx context.Context, _ *protos.RefreshRequest) (*protos.RefreshResponse, error) {
	leave, err := s.enter("refresh")
	if err != nil {
		return nil, err
	}
	leave() // a refresh changes nothing: only its start is gated
	bctx, cancel := s.bound(ctx)
	defer cancel()
	err = s.cluster.Refresh(bctx)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && bctx.Err() != nil && ctx.Err() == nil:
		s.log.Warn("server listing is slow; answering with the previous one", zap.Error(err))
	default:
		return nil, toStatus(err, codes.Unavailable, "refresh")
	}
	return &protos.RefreshResponse{}, nil
}

// pool returns the pool named id, or a NotFound status.
func (s *Server) pool(id string) (*pool.Pool, error) {
	if id == "" {
		return nil, status.Error(codes.NotFound, "node group id is empty")
	}
	g := s.group(id)
	if g == nil {
		return nil, status.Errorf(codes.NotFound, "node group %q does not exist", id)
	}
	return g.pool, nil
}

// toStatus maps an error of the Cluster or a pool to a gRPC status:
//
//   - [pool.ErrOfferingUnavailable]: ResourceExhausted. The pool's server
//     type is sold out in its location; the autoscaler backs the group off
//     and tries another.
//   - [pool.ErrInvalidDelta], [pool.ErrAboveMax], [pool.ErrNotInPool]:
//     InvalidArgument.
//   - [pool.ErrBelowMin]: FailedPrecondition.
//   - [pool.ErrClosed]: Unavailable; the server is shutting down.
//   - context deadline or cancellation: DeadlineExceeded or Canceled.
//   - anything else: fallback.
//
// The message is the error's text, which never holds secrets (tokens and
// user data are redacted types), prefixed with what was being done.
func toStatus(err error, fallback codes.Code, what string) error {
	code := fallback
	switch {
	case errors.Is(err, pool.ErrOfferingUnavailable):
		code = codes.ResourceExhausted
	case errors.Is(err, pool.ErrInvalidDelta), errors.Is(err, pool.ErrAboveMax), errors.Is(err, pool.ErrNotInPool):
		code = codes.InvalidArgument
	case errors.Is(err, pool.ErrBelowMin), errors.Is(err, pool.ErrRemoved):
		code = codes.FailedPrecondition
	case errors.Is(err, pool.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Errorf(code, "%s: %v", what, err)
}

// clampInt32 converts a size for the wire; sizes are far below the limit.
func clampInt32(n int) int32 {
	return int32(max(min(n, 1<<31-1), -1<<31))
}

// ServerOptions are the grpc.ServerOptions for serving s: interceptors
// (run first, in order) followed by its own, the transport credentials of
// tlsConfig (nil: plaintext), which count and log refused handshakes and
// report the certificates' expiry (see [WithRegisterer]), [DefaultLimits], and settings for many small
// calls on few connections: a codec that decodes only what the calls the
// autoscaler makes per node read (see codec.go) and a worker goroutine
// per CPU instead of a new goroutine per call. Serve on a listener
// wrapped by DefaultLimits.Listener, which caps the connections; options
// appended after these override them.
func (s *Server) ServerOptions(tlsConfig *tls.Config, interceptors ...grpc.UnaryServerInterceptor) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(append(interceptors, s.UnaryInterceptor())...),
		grpc.ForceServerCodecV2(s.codec()),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	opts = append(opts, DefaultLimits.ServerOptions()...)
	if tlsConfig != nil {
		s.tls.expiry.server.Store(tlsConfig)
		opts = append(opts, grpc.Creds(&observedCreds{TransportCredentials: credentials.NewTLS(tlsConfig), m: s.tls, log: s.handshakes}))
	}
	return opts
}

// codec is the server's codec, with s's pools to look up.
func (s *Server) codec() codec {
	return newCodec(func(id []byte) (string, bool, bool) {
		g := s.groupSet().byName[string(id)]
		if g == nil {
			return "", false, false
		}
		return g.pool.Name(), true, g.options
	})
}
