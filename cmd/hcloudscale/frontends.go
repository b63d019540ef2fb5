package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// listeners are the sockets serve listens on; health and metrics are nil
// without --health-listen and --metrics-listen.
type listeners struct {
	main, health, metrics net.Listener
}

// listen opens the sockets of --listen, --health-listen and
// --metrics-listen; on a failure it closes those it opened.
func listen(ctx context.Context, f *serveFlags) (*listeners, error) {
	var lc net.ListenConfig
	ls := &listeners{}
	var err error
	if ls.main, err = lc.Listen(ctx, "tcp", f.listen); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if f.healthListen != "" {
		if ls.health, err = lc.Listen(ctx, "tcp", f.healthListen); err != nil {
			ls.close()
			return nil, fmt.Errorf("--health-listen: %w", err)
		}
	}
	if f.metricsListen != "" {
		if ls.metrics, err = lc.Listen(ctx, "tcp", f.metricsListen); err != nil {
			ls.close()
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	return ls, nil
}

func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.metrics, ls.health, ls.main} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// frontends are the servers serve runs: the autoscaler's gRPC server and,
// if asked for, the health and metrics servers. Each ends by sending
// Serve's error on failed; the first failure stops all.
type frontends struct {
	hs         *health.Server
	gs         *grpc.Server
	hgs        *grpc.Server // nil without --health-listen
	healthLis  net.Listener // the health listener, limited for hgs
	metricsSrv *http.Server // nil without --metrics-listen
	failed     chan error
	running    int // servers that have not yet sent on failed
}

// newFrontends builds the servers; start runs them.
func newFrontends(f *serveFlags, b *backend, reg *prometheus.Registry, ls *listeners, serverTLS *tls.Config) *frontends {
	srv := externalgrpc.NewServer(b.cluster,
		externalgrpc.WithLogger(b.log),
		externalgrpc.WithRegisterer(reg),
		externalgrpc.WithCallTimeout(f.rpcTimeout),
		externalgrpc.WithGate(b.lead.gate()),
	)
	fe := &frontends{hs: health.NewServer(), failed: make(chan error, 3)}
	fe.gs = grpc.NewServer(srv.ServerOptions(serverTLS, b.lead.interceptors()...)...)
	protos.RegisterCloudProviderServer(fe.gs, srv)
	healthpb.RegisterHealthServer(fe.gs, fe.hs)
	if ls.health != nil {
		fe.hgs, fe.healthLis = newHealthServer(ls.health, fe.hs, defaultHealthLimits)
	}
	if ls.metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		fe.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	return fe
}

// start runs each server on its listener and reports the services
// serving.
func (fe *frontends) start(ls *listeners, lead *leadership) {
	fe.run("--listen", func() error { return fe.gs.Serve(lead.listener(externalgrpc.DefaultLimits.Listener(ls.main))) })
	if fe.hgs != nil {
		fe.run("--health-listen", func() error { return fe.hgs.Serve(fe.healthLis) })
	}
	if fe.metricsSrv != nil {
		fe.run("--metrics-listen", func() error { return fe.metricsSrv.Serve(ls.metrics) })
	}
	fe.hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	fe.hs.SetServingStatus(protos.CloudProvider_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// run serves in a goroutine that sends Serve's error, named after the
// flag, on failed; a server stopped on purpose sends nil.
func (fe *frontends) run(name string, serveFn func() error) {
	fe.running++
	go func() {
		err := serveFn()
		if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		fe.failed <- err
	}()
}

func (fe *frontends) logServing(log *zap.Logger, ls *listeners, tls bool, pools int, f *serveFlags) {
	fields := []zap.Field{zap.String("listen", ls.main.Addr().String()), zap.Bool("tls", tls), zap.Int("pools", pools),
		zap.String("list_ttl", f.listTTL.String()), zap.String("poll_interval", f.pollInterval.String()),
		zap.Int("gomaxprocs", runtime.GOMAXPROCS(0))}
	if fe.healthLis != nil {
		fields = append(fields, zap.String("health_listen", fe.healthLis.Addr().String()))
	}
	if ls.metrics != nil {
		fields = append(fields, zap.String("metrics_listen", ls.metrics.Addr().String()))
	}
	log.Info("serving", fields...)
}

// stop reports the services down, lets gRPC calls in progress finish for
// up to drain, stops the other servers and returns how each server ended.
func (fe *frontends) stop(drain time.Duration) []error {
	fe.hs.Shutdown()
	stopGracefully(fe.gs, drain)
	if fe.hgs != nil {
		fe.hgs.Stop()
	}
	if fe.metricsSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := fe.metricsSrv.Shutdown(ctx); err != nil {
			_ = fe.metricsSrv.Close()
		}
		cancel()
	}
	var errs []error
	for ; fe.running > 0; fe.running-- {
		errs = append(errs, <-fe.failed)
	}
	return errs
}
