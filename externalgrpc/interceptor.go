package externalgrpc

import (
	"context"
	"errors"
	"path"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// slowCall is the duration above which a call is logged at warn level: it
// eats into the autoscaler's 5 s deadline.
const slowCall = time.Second

// rpcMetrics are the collectors of UnaryInterceptor; nil fields when no
// registerer was given.
type rpcMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	m := &rpcMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hcloudscale", Subsystem: "externalgrpc", Name: "requests_total",
			Help: "Calls of the autoscaler's externalgrpc service by method and gRPC status code.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hcloudscale", Subsystem: "externalgrpc", Name: "request_duration_seconds",
			Help:    "Time to answer a call of the autoscaler's externalgrpc service, by method.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2, 3, 4, 5},
		}, []string{"method"}),
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	return m
}

// register registers c, or returns the collector already registered under
// the same description, so that two Servers can share a registerer.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// methodMetrics are one method's collectors, looked up on first use and
// kept: the autoscaler calls some methods thousands of times per loop,
// NodeGroupGetOptions mostly answered Unimplemented. Series appear only
// once used, as with WithLabelValues.
type methodMetrics struct {
	byCode   [numCodes]atomic.Pointer[prometheus.Counter]
	duration atomic.Pointer[prometheus.Observer]
}

// numCodes is the number of gRPC status codes (OK to Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// forMethods returns an empty methodMetrics for every method of the
// service.
func forMethods() map[string]*methodMetrics {
	out := make(map[string]*methodMetrics, len(protos.CloudProvider_ServiceDesc.Methods))
	for _, md := range protos.CloudProvider_ServiceDesc.Methods {
		out[md.MethodName] = &methodMetrics{}
	}
	return out
}

// observe counts a call of method that ended with code after elapsed.
func (m *rpcMetrics) observe(mm *methodMetrics, method string, code codes.Code, elapsed time.Duration) {
	if mm == nil || int(code) >= numCodes {
		m.requests.WithLabelValues(method, code.String()).Inc()
		m.duration.WithLabelValues(method).Observe(elapsed.Seconds())
		return
	}
	c := mm.byCode[code].Load()
	if c == nil {
		counter := m.requests.WithLabelValues(method, code.String())
		c = &counter
		mm.byCode[code].Store(c)
	}
	d := mm.duration.Load()
	if d == nil {
		o := m.duration.WithLabelValues(method)
		d = &o
		mm.duration.Store(d)
	}
	(*c).Inc()
	(*d).Observe(elapsed.Seconds())
}

// UnaryInterceptor logs every call (debug; warn when it took longer than a
// second, and every error at info) and counts it in the metrics of
// [WithRegisterer]. Install it with grpc.ChainUnaryInterceptor.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	methods := forMethods()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		elapsed := time.Since(start)
		method := path.Base(info.FullMethod)
		code := status.Code(err)
		s.metrics.observe(methods[method], method, code, elapsed)

		level, msg := zapcore.DebugLevel, "call"
		switch {
		case code == codes.Unimplemented:
			// The autoscaler asks NodeGroupGetOptions many times per loop
			// for pools without options; this is the expected answer.
		case err != nil:
			level, msg = zapcore.InfoLevel, "call failed"
		case elapsed > slowCall:
			level, msg = zapcore.WarnLevel, "slow call"
		}
		// Check first, so that a call that is not logged builds no fields.
		if ce := s.log.Check(level, msg); ce != nil {
			fields := []zap.Field{zap.String("method", method), zap.Duration("elapsed", elapsed), zap.Stringer("code", code)}
			if level == zapcore.InfoLevel {
				fields = append(fields, zap.Error(err))
			}
			ce.Write(fields...)
		}
		return resp, err
	}
}
