package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodecache"
	"github.com/hcloudscale/hcloudscale/pool"
)

// serveFlags are the flags of hcloudscale serve.
type serveFlags struct {
	nodes                        *stringsFlag
	listen                       string
	tlsCert, tlsKey, tlsClientCA string
	tlsClientNames               stringsFlag
	tlsClientPinned              string
	insecure                     bool
	healthListen                 string
	metricsListen                string
	log                          logFlags
	rpcTimeout                   time.Duration
	drainTimeout                 time.Duration
	shutdownTimeout              time.Duration
	listTTL                      time.Duration
	unavailableTTL               time.Duration
	spreadGrace                  time.Duration
	pollInterval                 time.Duration
	leader                       leaderFlags
	labels                       labelFlags
	replace                      replaceFlags
}

// minPollInterval is the shortest --poll-interval serve accepts.
const minPollInterval = 100 * time.Millisecond

func newServeFlags() (*flag.FlagSet, *serveFlags) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := &serveFlags{nodes: nodesFlag(fs)}
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8086", "address of the externalgrpc service, host:port; a non-loopback address needs the --tls-* flags or --insecure")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM file of the server certificate (mutual TLS; with --tls-key and --tls-client-ca)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM file of the server certificate's private key")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "PEM file of the CA that signs the autoscaler's client certificate; clients without one are refused")
	fs.Var(&f.tlsClientNames, "tls-client-name", "accept only client certificates that carry this `name` as a DNS or URI subject alternative name (repeatable); without it any certificate of --tls-client-ca may drive the pools")
	fs.StringVar(&f.tlsClientPinned, "tls-client-pinned", "", "PEM `file` of client certificates accepted without a --tls-client-name, each exactly as it is (still verified against --tls-client-ca, until it expires): the autoscaler's certificate of a former identity during the switch to a new one; reread when it changes")
	fs.BoolVar(&f.insecure, "insecure", false, "allow plaintext on a non-loopback --listen address: anyone who reaches it can create and delete servers")
	fs.StringVar(&f.healthListen, "health-listen", "", "extra plaintext address serving only the gRPC health service, for kubelet gRPC probes, which cannot do mutual TLS (empty: none)")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":8085", "address of the Prometheus /metrics endpoint (empty: none)")
	f.log.register(fs)
	f.labels.register(fs)
	f.replace.register(fs)
	fs.DurationVar(&f.rpcTimeout, "rpc-timeout", externalgrpc.DefaultCallTimeout, "bound on the work of one call; keep it below the autoscaler's grpc_timeout (5s)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long calls in progress may finish before the service stops")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 2*time.Minute, "on SIGTERM, how long server creates in flight may run to a safe point before they are cancelled")
	fs.DurationVar(&f.unavailableTTL, "unavailable-ttl", pool.DefaultUnavailableTTL, "how long a capacity error (a server type sold out in a location, a full placement group) keeps that offering from scale-ups; a pool's next offering is used meanwhile")
	fs.DurationVar(&f.spreadGrace, "spread-group-grace", pool.DefaultSpreadGrace, "how long a spread placement group that hcloudscale created for a pool with spreadGroups stays empty before it is deleted; shorter frees the project's places (50 placement groups) sooner, longer keeps the group for the next scale-up")
	fs.DurationVar(&f.listTTL, "list-ttl", hcloudscale.DefaultListTTL, "base time between two listings of the project's servers: changes made by others (a server deleted in the console, a power cycle) show after it; the listing budget of 180 requests per hour makes it at least 20s per page of 50 servers")
	fs.DurationVar(&f.pollInterval, "poll-interval", hcloudscale.DefaultPollInterval, "shortest time between two polls of the actions of creates and deletes in flight; the other pauses of the action waiter and of server status polls are multiples of it; at least 100ms")
	f.leader.register(fs)
	return fs, f
}

func serveHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale serve --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [flags]

Serves the Cluster Autoscaler's externalgrpc cloud-provider protocol, so that a stock
autoscaler started with --cloud-provider=externalgrpc --cloud-config=<file> scales the
Hetzner Cloud pools given by --nodes and the environment. Pools, token and cluster config
are configured here, not in the autoscaler. Pools may also be declared in the cluster
config alone (nodeConfigs.<pool> with serverType, location and maxSize); a file given by
HCLOUD_CLUSTER_CONFIG_FILE (such as a mounted ConfigMap) is read again when it changes
and applied at the autoscaler's next Refresh: pools added, changed and removed without
a restart. A file that does not load changes nothing (hcloudscale_config_reload_success
0, logged). Run one replica per cluster, or
several with --leader-elect: only the holder of a Kubernetes Lease changes
servers, and only while its last renewal is younger than the renew deadline;
standbys answer reads and refuse Refresh and changes with Unavailable (the
autoscaler skips that loop and reconnects), and a leader that loses the
Lease stops changing at once and exits with 1.

Scale-ups return at once and servers are created in the background. On SIGTERM, SIGINT
or SIGHUP a leader hands the Lease over as soon as every request it sent has its answer; then the
service stops taking calls (--drain-timeout) and waits for creates in flight to reach a
safe point (--shutdown-timeout); a second signal ends the process at once.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 clean shutdown, 1 failure (reported on stderr), 2 bad usage.",
			"hcloudscale serve --nodes=1:5:cpx22:fsn1:workers --listen=127.0.0.1:8086")
	}
}

// check validates the flags and reports every problem at once.
func (f *serveFlags) check() error {
	var errs []error
	addr := func(name, value string, optional bool) {
		if value == "" && optional {
			return
		}
		if _, _, err := net.SplitHostPort(value); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: want host:port: %w", name, value, err))
		}
	}
	addr("listen", f.listen, false)
	addr("health-listen", f.healthListen, true)
	addr("metrics-listen", f.metricsListen, true)
	if f.replace.dryRun && !f.replace.enabled {
		errs = append(errs, errors.New("--replace-dry-run needs --replace-nodes"))
	}
	if f.replace.interval < time.Second {
		errs = append(errs, fmt.Errorf("--replace-interval %v: want at least 1s", f.replace.interval))
	}

	set := 0
	for _, v := range []string{f.tlsCert, f.tlsKey, f.tlsClientCA} {
		if v != "" {
			set++
		}
	}
	tlsOn := set == 3
	switch {
	case set != 0 && set != 3:
		errs = append(errs, errors.New("--tls-cert, --tls-key and --tls-client-ca go together: the autoscaler speaks mutual TLS only"))
	case !tlsOn && len(f.tlsClientNames) > 0:
		errs = append(errs, errors.New("--tls-client-name needs --tls-cert, --tls-key and --tls-client-ca"))
	case f.tlsClientPinned != "" && len(f.tlsClientNames) == 0:
		errs = append(errs, errors.New("--tls-client-pinned needs --tls-client-name: without a name every certificate of --tls-client-ca is accepted already"))
	case tlsOn && f.insecure:
		errs = append(errs, errors.New("--insecure contradicts --tls-cert, --tls-key and --tls-client-ca"))
	case !tlsOn && !f.insecure && f.listen != "" && !loopback(f.listen):
		errs = append(errs, fmt.Errorf("--listen %s is not a loopback address: without TLS anyone who reaches it can create and delete servers; "+
			"set --tls-cert, --tls-key and --tls-client-ca, or --insecure if a NetworkPolicy or the pod network keeps others out", f.listen))
	}
	if err := f.log.check(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, f.leader.check()...)
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"rpc-timeout", f.rpcTimeout}, {"drain-timeout", f.drainTimeout}, {"shutdown-timeout", f.shutdownTimeout},
		{"list-ttl", f.listTTL}, {"poll-interval", f.pollInterval}, {"unavailable-ttl", f.unavailableTTL},
		{"spread-group-grace", f.spreadGrace}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s %s: must be positive", d.name, d.value))
		}
	}
	if f.pollInterval > 0 && f.pollInterval < minPollInterval {
		errs = append(errs, fmt.Errorf("--poll-interval %s: must be at least %s: every pause between polls is a multiple of it, and shorter ones spend the API budget", f.pollInterval, minPollInterval))
	}
	return errors.Join(errs...)
}

// loopback reports whether a host:port names a loopback address. An empty
// host, 0.0.0.0 and :: listen everywhere; host names other than localhost
// are not trusted to resolve to loopback.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// runServe is the serve subcommand.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs, f := newServeFlags()
	if code, ok := parseFlags(fs, args, stdout, stderr, serveHelp(fs)); !ok {
		return code
	}
	if err := f.check(); err != nil {
		return usageError(stderr, "serve", err)
	}
	log, err := f.log.build(stderr)
	if err != nil {
		return usageError(stderr, "serve", err)
	}
	defer func() { _ = log.Sync() }()
	if limit, err := setMemoryLimit(env); err != nil {
		return usageError(stderr, "serve", err)
	} else if limit > 0 {
		log.Info("Go memory limit set from the container's", zap.Int64("gomemlimit_bytes", limit))
	}

	if err := serve(ctx, f, env, log); err != nil {
		log.Error("serve failed", zap.Error(err))
		return exitFailure
	}
	return exitOK
}

// serve runs until ctx ends or a listener fails, then shuts down.
func serve(ctx context.Context, f *serveFlags, env config.Env, log *zap.Logger) error {
	cfg, err := config.Load(env, *f.nodes)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	var serverTLS *tls.Config
	if f.tlsCert != "" {
		if serverTLS, err = externalgrpc.ServerTLSConfig(f.tlsCert, f.tlsKey, f.tlsClientCA,
			externalgrpc.WithClientNames(f.tlsClientNames...), externalgrpc.WithPinnedClientCertificates(f.tlsClientPinned),
			externalgrpc.WithReloadErrors(func(err error) {
				log.Warn("TLS files changed but cannot be loaded: serving with the ones loaded before", zap.Error(err))
			})); err != nil {
			return err
		}
		if len(f.tlsClientNames) == 0 && !loopback(f.listen) {
			log.Warn("any client certificate of --tls-client-ca may create and delete servers: set --tls-client-name to the autoscaler's certificate's name, above all with a shared issuer")
		}
	}
	// Listen before the API checks, so a busy port fails at once.
	ls, err := listen(ctx, f)
	if err != nil {
		return err
	}
	defer ls.close()
	reg, err := newServeRegistry()
	if err != nil {
		return err
	}
	b, err := startBackend(ctx, f, env, cfg, reg, log)
	if err != nil {
		return err
	}

	fe := newFrontends(f, b, reg, ls, serverTLS)
	fe.start(ls, b.lead)
	fe.logServing(log, ls, serverTLS != nil, len(cfg.Pools), f)
	errs := awaitEnd(ctx, b, fe, log)
	// With --leader-elect the Lease goes to the next replica first, as
	// soon as every write sent has its answer; it resumes what this one
	// leaves unfinished. Calls still in progress here are only reads.
	b.lead.handOver(f.shutdownTimeout)
	errs = append(errs, fe.stop(f.drainTimeout)...)
	errs = append(errs, b.close(f.shutdownTimeout))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("shut down")
	return nil
}

// newServeRegistry is the registry /metrics serves: the Go and process
// collectors, the build info and, once registered, the Cluster's and the
// server's metrics.
func newServeRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	if err := errors.Join(
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
		reg.Register(newBuildInfoCollector()),
	); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return reg, nil
}

// backend is what the gRPC server answers from: the Cluster, the
// leadership (nil-safe without --leader-elect) and the node labeller,
// with the logger they share.
type backend struct {
	log           *zap.Logger
	cluster       *hcloudscale.Cluster
	lead          *leadership
	stopLabeller  func()
	stopLifecycle func()
	// stopNodes stops the Node cache the two above share, after them.
	stopNodes func()
}

// startBackend checks the configuration against the API and starts the
// leadership and the node labeller.
func startBackend(ctx context.Context, f *serveFlags, env config.Env, cfg *config.Config, reg *prometheus.Registry, log *zap.Logger) (*backend, error) {
	// With --leader-elect only the leader writes: its fence guards every
	// request that changes servers, and only it finishes the create flows
	// a previous process left unfinished.
	b := &backend{log: log}
	for _, w := range placeholderWarnings(cfg) {
		log.Warn(w)
	}
	lead, err := newLeadership(f.leader, f.labels.kubeconfig, env, reg, log)
	if err != nil {
		return nil, err
	}
	// A configuration file is read again at the autoscaler's Refresh,
	// which only the leader answers.
	cluster, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithRegisterer(reg),
		hcloudscale.WithListTTL(f.listTTL), hcloudscale.WithPollInterval(f.pollInterval), hcloudscale.WithUnavailableTTL(f.unavailableTTL),
		hcloudscale.WithSpreadGrace(f.spreadGrace),
		hcloudscale.WithFence(lead.fence()),
		hcloudscale.WithResumeWhen(lead.leads),
		hcloudscale.WithConfigFileReload(env, *f.nodes, cfg))
	if err != nil {
		return nil, fmt.Errorf("checking the configuration against the API: %w", err)
	}
	b.cluster, b.lead = cluster, lead
	client, nodes, startNodes, stopNodes, err := newNodeCache(ctx, f, env)
	if err != nil {
		_ = closeCluster(cluster, f.shutdownTimeout)
		return nil, err
	}
	if b.stopLabeller, err = startLabeller(ctx, &f.labels, cfg, client, nodes, cluster, log); err != nil {
		stopNodes()
		_ = closeCluster(cluster, f.shutdownTimeout)
		return nil, err
	}
	b.stopNodes, b.stopLifecycle = stopNodes, func() {}
	if !f.replace.enabled {
		b.stopLifecycle = rollBackLeftovers(ctx, f, env, b)
	}
	if f.replace.enabled {
		stopLifecycle, err := runLifecycle(ctx, &f.replace, client, b, []lifecycle.Option{lifecycle.WithRegisterer(reg), lifecycle.WithNodeCache(nodes)})
		if err != nil {
			b.stopLabeller()
			stopNodes()
			_ = closeCluster(cluster, f.shutdownTimeout)
			return nil, fmt.Errorf("--replace-nodes: %w", err)
		}
		b.stopLifecycle = stopLifecycle
	}
	// Only now that both checked their permissions: a missing one fails
	// the start with its own message, before any watch.
	startNodes()
	return b, nil
}

// newNodeCache makes the one Node cache the node labeller and the node
// lifecycle share, when either runs, and the functions that start and
// stop it (stop after both stopped). client is nil when neither runs.
func newNodeCache(ctx context.Context, f *serveFlags, env config.Env) (client kubernetes.Interface, nodes *nodecache.Cache, start, stop func(), err error) {
	if !f.labels.enabled && !f.replace.enabled {
		return nil, nil, func() {}, func() {}, nil
	}
	if client, err = kubeClient(f.labels.kubeconfig, env); err != nil {
		flag := "--label-nodes"
		if !f.labels.enabled {
			flag = "--replace-nodes"
		}
		return nil, nil, nil, nil, fmt.Errorf("%s: %w", flag, err)
	}
	nodes = nodecache.New(client, 0)
	ctx, cancel := context.WithCancel(ctx)
	return client, nodes, func() { nodes.Start(ctx) }, func() { cancel(); nodes.Shutdown() }, nil
}

// awaitEnd starts the leader election and waits until ctx ends, a server
// fails or the Lease is lost; it returns why serving ended, if not ctx.
func awaitEnd(ctx context.Context, b *backend, fe *frontends, log *zap.Logger) []error {
	lead := b.lead
	if err := lead.start(ctx, b.cluster); err != nil {
		return []error{err}
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new calls")
	case err := <-fe.failed:
		fe.running--
		return []error{err}
	case <-lead.lost():
		return []error{fmt.Errorf("lost the leader Lease; restart as a standby: %w", lead.Err())}
	}
	return nil
}

// close stops the labeller and waits up to timeout for the server creates
// in flight to reach a safe point. With --leader-elect the Lease is gone
// by then (handOver): the fence stops each flow at its next write, and the
// new leader resumes it.
func (b *backend) close(timeout time.Duration) error {
	b.stopLifecycle()
	b.stopLabeller()
	b.stopNodes()
	b.log.Info("waiting for server creates in flight", zap.Duration("timeout", timeout))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	if cerr := b.cluster.Close(ctx); cerr != nil {
		err = fmt.Errorf("closing the pools: %w", cerr)
	}
	b.lead.stop()
	return err
}

// stopGracefully lets calls in progress finish for up to d, then cuts
// them off.
func stopGracefully(gs interface {
	GracefulStop()
	Stop()
}, d time.Duration) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
}
