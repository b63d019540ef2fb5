// Package inprocess runs the node lifecycle's scenarios of package e2e
// over the externalgrpc protocol: the autoscaler's externalgrpc client
// talks, over loopback with mutual TLS, to the gRPC server of package
// externalgrpc that serve runs, here in the test process so that the
// node lifecycle runs on its Cluster beside it with the suite's
// Kubernetes, a fake clientset in this process, as serve --replace-nodes
// runs it beside its server.
//
// The autoscaler's generated externalgrpc protos and hcloudscale's
// register the same protobuf names; the test binary runs only with
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT=ignore in its environment (each
// package keeps marshalling with its own descriptors; the names only
// collide in the global registry, which neither side reads). See
// ../../README.md.
package inprocess

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/e2e"
	"github.com/hcloudscale/hcloudscale/e2e/externalgrpc/caclient"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

var klogFile = flag.String("klog", "", "file for the autoscaler's log (default: a new file in the temporary directory, named at the start)")

// certs holds the CA, the server's and the client's certificates.
var certs string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		var done func()
		var err error
		if certs, done, err = caclient.Prepare(*klogFile, "hcloudscale-e2e-inprocess-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer done()
		defer os.RemoveAll(certs)
		return m.Run()
	}())
}

// TestServeLifecycle runs the node lifecycle's scenarios over the
// externalgrpc protocol.
func TestServeLifecycle(t *testing.T) {
	for _, sc := range e2e.LifecycleScenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, &servedKind{}) })
	}
}

// servedKind starts a Cluster, and serve's gRPC server on it with mutual
// TLS, as serve does (without leader election: one replica), and the
// autoscaler's externalgrpc client built as its builder builds it. A
// restart starts a new Cluster and server on the same address; the
// client reconnects.
type servedKind struct {
	addr string
}

func (*servedKind) Name() string { return "externalgrpc" }

// served is the client, with the server and the Cluster behind it.
type served struct {
	cloudprovider.CloudProvider
	cluster *hcloudscale.Cluster
	gs      *grpc.Server
}

// Cluster returns the Cluster of a server the kind started, for the node
// lifecycle.
func (*servedKind) Cluster(p any) *hcloudscale.Cluster { return p.(*served).cluster }

func (k *servedKind) Start(t *testing.T, s e2e.Setup) (cloudprovider.CloudProvider, error) {
	env := config.Env{Lookup: func(key string) (string, bool) { v, ok := s.Env[key]; return v, ok }, ReadFile: os.ReadFile}
	cfg, err := config.Load(env, s.Nodes)
	if err != nil {
		return nil, err
	}
	log := e2e.ProviderLog()
	reg := prometheus.NewRegistry()
	cluster, err := hcloudscale.New(context.Background(), cfg, hcloudscale.WithLogger(log), hcloudscale.WithRegisterer(reg),
		hcloudscale.WithPollInterval(s.Interval), hcloudscale.WithListTTL(s.ListTTL),
		hcloudscale.WithUnavailableTTL(s.UnavailableTTL), // serve's --unavailable-ttl
		hcloudscale.WithConfigFileReload(env, s.Nodes, cfg),
		hcloudscale.WithClientOptions(
			hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(50 * time.Millisecond), MaxRetries: 3}),
			hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(s.Interval)}),
		))
	if err != nil {
		return nil, err
	}
	p := &served{cluster: cluster}
	if err := k.serve(p, log, reg); err != nil {
		_ = k.Stop(p)
		return nil, err
	}
	if p.CloudProvider, err = caclient.Build(certs, k.addr); err != nil {
		_ = k.Stop(p)
		return nil, err
	}
	return p, nil
}

// serve starts serve's gRPC server on the Cluster of p, on k.addr (a new
// loopback port the first time).
func (k *servedKind) serve(p *served, log *zap.Logger, reg prometheus.Registerer) error {
	tlsConfig, err := externalgrpc.ServerTLSConfig(filepath.Join(certs, "server.crt"), filepath.Join(certs, "server.key"), filepath.Join(certs, "ca.crt"))
	if err != nil {
		return err
	}
	addr := k.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	k.addr = lis.Addr().String()
	srv := externalgrpc.NewServer(p.cluster, externalgrpc.WithLogger(log), externalgrpc.WithRegisterer(reg))
	p.gs = grpc.NewServer(srv.ServerOptions(tlsConfig)...)
	protos.RegisterCloudProviderServer(p.gs, srv)
	go func() { _ = p.gs.Serve(externalgrpc.DefaultLimits.Listener(lis)) }()
	return nil
}

// Stop ends the server and the Cluster at once, cancelling creates in
// flight: as close to a crash as one process comes.
func (*servedKind) Stop(cp cloudprovider.CloudProvider) error {
	p := cp.(*served)
	if p.gs != nil {
		p.gs.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = p.cluster.Close(ctx)
	return nil
}
