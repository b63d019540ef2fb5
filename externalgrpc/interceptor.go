package externalgrpc

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// UnaryInterceptor logs every call (debug; warn when it took longer than a
// second, and every error at info) and counts it in the metrics of
// [WithRegisterer]. Install it with grpc.ChainUnaryInterceptor.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		elapsed := time.Since(start)
		method := path.Base(info.FullMethod)
		code := status.Code(err)
		s.metrics.requests.WithLabelValues(method, code.String()).Inc()
		s.metrics.duration.WithLabelValues(method).Observe(elapsed.Seconds())

		fields := []zap.Field{zap.String("method", method), zap.Duration("elapsed", elapsed), zap.Stringer("code", code)}
		switch {
		case code == codes.Unimplemented:
			// The autoscaler asks NodeGroupGetOptions many times per loop
			// for pools without options; this is the expected answer.
			s.log.Debug("call", fields...)
		case err != nil:
			s.log.Info("call failed", append(fields, zap.Error(err))...)
		case elapsed > slowCall:
			s.log.Warn("slow call", fields...)
		default:
			s.log.Debug("call", fields...)
		}
		return resp, err
	}
}
