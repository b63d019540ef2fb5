package main

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/nodesim"
	"github.com/hcloudscale/hcloudscale/pool"
)

// demoClusterConfig is the cluster config of the demo, loaded through
// config.Load as HCLOUD_CLUSTER_CONFIG_FILE like any user's.
//
//go:embed demo.json
var demoClusterConfig string

// demoNodes are the demo's pools: x86 workers, and one Arm pool in each
// of two locations, so that the autoscaler has somewhere to go when one
// location sells out.
var demoNodes = []string{
	"0:10:cpx31:fsn1:workers-fsn1",
	"0:5:cax21:nbg1:arm-nbg1",
	"0:5:cax21:hel1:arm-hel1",
}

// demoTimings are the fake API's action durations and latency, and how
// often the demo's pools poll actions and the demo samples progress.
type demoTimings struct {
	create, start, delete, other time.Duration
	latency                      time.Duration
	poll, sample                 time.Duration
}

// demoSpeed returns timings in the proportions of the real API, scaled
// down so the demo takes seconds: Hetzner takes tens of seconds to create
// a server from a system image.
func demoSpeed(fast bool) demoTimings {
	t := demoTimings{
		create:  1500 * time.Millisecond,
		start:   500 * time.Millisecond,
		delete:  500 * time.Millisecond,
		other:   500 * time.Millisecond,
		latency: 20 * time.Millisecond,
		poll:    hcloudscale.DefaultPollInterval,
		sample:  100 * time.Millisecond,
	}
	if fast {
		t = demoTimings{
			create: t.create / 10, start: t.start / 10, delete: t.delete / 10, other: t.other / 10,
			latency: t.latency / 10, poll: t.poll / 10, sample: t.sample / 10,
		}
	}
	return t
}

func demoHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale demo [flags]

Runs hcloudscale against an in-memory Hetzner Cloud API on 127.0.0.1, with no token and
no cluster, and narrates what an autoscaler sees: a scale-up that returns at once while
servers are created in the background, a server type that sells out in one location and
the capacity error that makes the autoscaler fail over to another pool, a scale-down, a
pool's image changed and its node replaced by the node lifecycle against a simulated
cluster (a Kubernetes API of the demo's nodes on 127.0.0.1), and the API requests all of
it cost. It takes about 14 seconds (about 5 with --fast).

With --keep the fake API and the simulated cluster keep running until interrupted, and
the demo prints the environment (token, endpoint, cluster-config file, KUBECONFIG; the
provider's other variables unset) that points status, replace --plan and scale, run
from another shell, at them.

The demo's configuration is an ordinary cluster config (cmd/hcloudscale/demo.json) with
three pools:
  --nodes=`+strings.Join(demoNodes, " --nodes=")+`
It ignores the environment.

Flags:
`)
		printFlags(w, fs)
		fmt.Fprint(w, "\nEnvironment variables: none are read.\n")
		printExitAndExamples(w, "0 the scenario ran, 1 it failed (reported on stderr), 2 bad usage.",
			[]string{"go run ./cmd/hcloudscale demo --fast"})
	}
}

// runDemo is "hcloudscale demo".
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, _ config.Env) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fast := fs.Bool("fast", false, "run ten times as fast (short action delays)")
	keep := fs.Bool("keep", false, "keep the fake API and the simulated cluster running until interrupted, and print the environment for status and replace --plan")
	var lf logFlags
	fs.StringVar(&lf.level, "log-level", "", "log level of the library's log on stderr: debug, info, warn or error (default: no log)")
	fs.StringVar(&lf.format, "log-format", "console", "log format: json or console")
	if code, ok := parseFlags(fs, args, stdout, stderr, demoHelp(fs)); !ok {
		return code
	}
	log := zap.NewNop()
	if lf.level != "" {
		if err := lf.check(); err != nil {
			return usageError(stderr, "demo", err)
		}
		l, err := lf.build(stderr)
		if err != nil {
			return usageError(stderr, "demo", err)
		}
		log = l
	}
	d := &demo{out: stdout, t: demoSpeed(*fast), log: log, keepRunning: *keep}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stderr, "hcloudscale demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// demo is one run of the scenario.
type demo struct {
	out io.Writer
	t   demoTimings
	log *zap.Logger

	api     *hcloudtest.Server
	kube    *nodesim.Server
	cluster *hcloudscale.Cluster
	// config is the cluster config the demo's Cluster runs.
	config      string
	keepRunning bool
}

// demoTimeout bounds the whole scenario (not what --keep waits for), so
// that a bug shows up as a failure rather than a hang.
const demoTimeout = time.Minute

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, format, args...)
}

func (d *demo) run(parent context.Context) (err error) {
	ctx, cancel := context.WithTimeout(parent, demoTimeout)
	defer cancel()
	start := time.Now()

	d.api = hcloudtest.NewServer(
		hcloudtest.WithDefaultActionDuration(d.t.other),
		hcloudtest.WithActionDuration("create_server", d.t.create),
		hcloudtest.WithActionDuration("start_server", d.t.start),
		hcloudtest.WithActionDuration("delete_server", d.t.delete),
	)
	defer d.api.Close()
	d.api.SetLatency(d.t.latency)
	d.kube = nodesim.NewServer()
	defer d.kube.Close()

	if err := d.setup(ctx); err != nil {
		return err
	}
	defer func() {
		if cerr := closeCluster(d.cluster, 5*time.Second); cerr != nil && err == nil {
			err = fmt.Errorf("closing the cluster: %w", cerr)
		}
	}()
	setupRequests := sum(d.api.Counts())

	workers, armNBG, armHEL := d.cluster.Pool("workers-fsn1"), d.cluster.Pool("arm-nbg1"), d.cluster.Pool("arm-hel1")
	if err := d.scaleUp(ctx, workers); err != nil {
		return err
	}
	if err := d.failOver(ctx, armNBG, armHEL); err != nil {
		return err
	}
	if err := d.scaleDown(ctx, workers, armHEL); err != nil {
		return err
	}
	if err := d.replaceImage(ctx, workers); err != nil {
		return err
	}
	d.summary(start, setupRequests)
	if d.keepRunning {
		return d.keep(parent)
	}
	return nil
}

// setup fills the fake project, loads the demo config and builds the
// Cluster.
func (d *demo) setup(ctx context.Context) error {
	if _, err := d.api.AddNetwork(hcloudtest.Network{Name: "demo-network", IPRange: "10.0.0.0/8", Subnets: []hcloudtest.Subnet{{IPRange: "10.0.0.0/16"}}}); err != nil {
		return fmt.Errorf("setting up the fake API: %w", err)
	}
	if _, err := d.api.AddFirewall(hcloudtest.Firewall{Name: "demo-nodes"}); err != nil {
		return fmt.Errorf("setting up the fake API: %w", err)
	}
	if _, err := d.api.AddSSHKey(hcloudtest.SSHKey{Name: "demo-ops"}); err != nil {
		return fmt.Errorf("setting up the fake API: %w", err)
	}

	d.printf("hcloudscale demo: node pools on an in-memory Hetzner Cloud API (no token, no cluster)\n\n")
	d.printf("Setup\n")
	d.printf("  fake API   %s  (create_server %s, start_server %s, delete_server %s, %s per request)\n",
		d.api.URL(), d.t.create, d.t.start, d.t.delete, d.t.latency)
	d.printf("  project    network demo-network, firewall demo-nodes, SSH key demo-ops\n")

	d.config = demoClusterConfig
	cfg, err := d.loadConfig(d.config)
	if err != nil {
		return err
	}
	d.printf("  config     cluster %q from a cluster-config file, read by config.Load with\n", cfg.ClusterName)
	for _, n := range demoNodes {
		d.printf("             --nodes=%s\n", n)
	}

	began := time.Now()
	d.cluster, err = hcloudscale.New(ctx, cfg,
		hcloudscale.WithLogger(d.log),
		hcloudscale.WithPollInterval(d.t.poll),
		hcloudscale.WithTransport(callCountingTransport{next: http.DefaultTransport.(*http.Transport).Clone()}),
	)
	if err != nil {
		return fmt.Errorf("building the cluster: %w", err)
	}
	d.printf("  checked    hcloudscale.New looked up the network, firewall, SSH key, server types and\n")
	d.printf("             images, and listed the cluster's servers: %s in %s\n\n",
		plural(sum(d.api.Counts()), "request"), since(began))

	types, err := d.cluster.ServerTypes(ctx)
	if err != nil {
		return fmt.Errorf("reading the server types: %w", err)
	}
	arch := map[string]config.Arch{}
	for _, t := range types {
		arch[t.Name] = t.Arch
	}
	tb := newTable(d.out, "  POOL", "TYPE", "ARCH", "LOCATION", "MIN", "MAX", "PRICE/HOUR (NET)")
	now := time.Now()
	for _, p := range d.cluster.Pools() {
		pc := p.Config()
		price, err := p.Price(now, now.Add(time.Hour))
		if err != nil {
			return err
		}
		tb.row("  "+p.Name(), pc.ServerType, arch[pc.ServerType], pc.Location, pc.MinSize, pc.MaxSize, fmt.Sprintf("%.4f", price))
	}
	tb.flush()
	return nil
}

// loadConfig loads the cluster config doc through config.Load, as
// HCLOUD_CLUSTER_CONFIG_FILE like any user's.
func (d *demo) loadConfig(doc string) (*config.Config, error) {
	const configPath = "/etc/hcloudscale/cluster-config.json"
	env := config.MapEnv(map[string]string{
		config.EnvToken:             d.api.Token(),
		config.EnvEndpoint:          d.api.URL(),
		config.EnvNetwork:           "demo-network",
		config.EnvFirewall:          "demo-nodes",
		config.EnvSSHKey:            "demo-ops",
		config.EnvClusterConfigFile: configPath,
	}, map[string]string{configPath: doc})
	cfg, err := config.Load(env, demoNodes)
	if err != nil {
		return nil, fmt.Errorf("loading the demo config: %w", err)
	}
	return cfg, nil
}

// scaleUp asks for three workers and shows them come up.
func (d *demo) scaleUp(ctx context.Context, workers *pool.Pool) error {
	d.printf("\n1. Scale-up: the autoscaler asks %s for 3 servers\n", workers.Name())
	callCtx, calls := countCalls(ctx)
	began := time.Now()
	if err := workers.IncreaseSize(callCtx, 3); err != nil {
		return fmt.Errorf("IncreaseSize on %s: %w", workers.Name(), err)
	}
	d.printf("   IncreaseSize(3) returned after %s with %s; target size %d.\n",
		since(began), plural(int(calls.Load()), "API request"), workers.TargetSize())
	d.printf("   The servers are created in the background (one loop of the autoscaler is not blocked):\n")
	if err := d.watch(ctx, func() bool { return workers.Status().Running == 3 }, workers); err != nil {
		return err
	}
	d.printf("   3 servers running after %s\n", since(began))
	return nil
}

// failOver sells cax21 out in nbg1 and shows how the autoscaler moves to
// the same type in hel1.
func (d *demo) failOver(ctx context.Context, soldOut, next *pool.Pool) error {
	sc := soldOut.Config()
	d.printf("\n2. %s sells out in %s: the autoscaler fails over to %s\n", sc.ServerType, sc.Location, next.Name())
	d.api.SetUnavailable(sc.ServerType, sc.Location, true)
	d.printf("   The fake API now answers resource_unavailable to creates of %s in %s, as Hetzner\n", sc.ServerType, sc.Location)
	d.printf("   does in a shortage, while its catalogue still offers the type.\n")
	if err := soldOut.IncreaseSize(ctx, 2); err != nil {
		return fmt.Errorf("IncreaseSize on %s: %w", soldOut.Name(), err)
	}
	d.printf("   IncreaseSize(2) on %s returned at once; the creates fail in the background:\n", soldOut.Name())
	if err := d.watch(ctx, func() bool {
		st := soldOut.Status()
		return st.Failed == 2 && st.PendingClaims == 0
	}, soldOut); err != nil {
		return err
	}

	var failed []string
	for _, in := range soldOut.Instances() {
		if in.Error == nil {
			continue
		}
		failed = append(failed, in.ID)
		d.printf("   placeholder %s  state %s, %s: %s\n", in.ID, in.State, in.Error.Class, in.Error.Code)
	}
	if len(failed) == 0 {
		return fmt.Errorf("%s: no failed instance after the sold-out creates", soldOut.Name())
	}
	d.printf("   The autoscaler recognises a failed scale-up by Creating instances with an error;\n")
	d.printf("   OutOfResources makes it back %s off and delete them (no API request):\n", soldOut.Name())
	callCtx, calls := countCalls(ctx)
	if err := soldOut.DeleteInstances(callCtx, failed); err != nil {
		return fmt.Errorf("deleting the placeholders of %s: %w", soldOut.Name(), err)
	}
	d.printf("   DeleteInstances removed %s with %s; target size %d\n",
		plural(len(failed), "placeholder"), plural(int(calls.Load()), "API request"), soldOut.TargetSize())

	callCtx, calls = countCalls(ctx)
	err := soldOut.IncreaseSize(callCtx, 2)
	if !errors.Is(err, pool.ErrOfferingUnavailable) {
		return fmt.Errorf("IncreaseSize on %s after the capacity error: got %v, want an error matching pool.ErrOfferingUnavailable", soldOut.Name(), err)
	}
	d.printf("   Until the offering is retried (5 minutes), IncreaseSize on %s fails at once, with %s:\n",
		soldOut.Name(), plural(int(calls.Load()), "API request"))
	d.printf("     %v\n", err)

	nc := next.Config()
	d.printf("   The expander picks the next pool that fits the pods: %s (%s in %s)\n", next.Name(), nc.ServerType, nc.Location)
	began := time.Now()
	if err := next.IncreaseSize(ctx, 2); err != nil {
		return fmt.Errorf("IncreaseSize on %s: %w", next.Name(), err)
	}
	if err := d.watch(ctx, func() bool { return next.Status().Running == 2 }, next); err != nil {
		return err
	}
	d.printf("   2 servers running in %s after %s\n", next.Name(), since(began))
	return nil
}

// scaleDown deletes the two newest workers and every server of arm.
func (d *demo) scaleDown(ctx context.Context, workers, arm *pool.Pool) error {
	d.printf("\n3. Scale-down: the load is gone; the autoscaler removes 2 workers and both Arm servers\n")
	began := time.Now()
	if err := workers.DeleteInstances(ctx, newestServers(workers, 2)); err != nil {
		return fmt.Errorf("DeleteInstances on %s: %w", workers.Name(), err)
	}
	if err := arm.DeleteInstances(ctx, newestServers(arm, 2)); err != nil {
		return fmt.Errorf("DeleteInstances on %s: %w", arm.Name(), err)
	}
	d.printf("   DeleteInstances returned after %s, once the API accepted the deletes; the servers\n", since(began))
	d.printf("   leave the target size at once and are gone when their delete actions finish:\n")
	gone := func() bool {
		ws, as := workers.Status(), arm.Status()
		left, _ := d.api.Servers(config.LabelCluster + "=demo")
		return ws.Deleting == 0 && as.Deleting == 0 && len(left) == 1
	}
	if err := d.watch(ctx, gone, workers, arm); err != nil {
		return err
	}
	d.printf("   deleted after %s\n", since(began))
	return nil
}

// newestServers returns the instance IDs of the n servers of p with the
// highest IDs, the newest ones.
func newestServers(p *pool.Pool, n int) []string {
	var servers []pool.Instance
	for _, in := range p.Instances() {
		if in.ServerID != 0 && in.State != pool.Deleting {
			servers = append(servers, in)
		}
	}
	slices.SortFunc(servers, func(a, b pool.Instance) int { return cmp.Compare(b.ServerID, a.ServerID) })
	var ids []string
	for _, in := range servers[:min(n, len(servers))] {
		ids = append(ids, in.ID)
	}
	return ids
}

// callCounterKey marks a context whose API requests countCalls counts.
type callCounterKey struct{}

// countCalls returns a context that counts the API requests made with it
// (or with contexts derived from it) into the returned counter. The fake
// API's own counts cannot tell what one call cost: the create flows that
// IncreaseSize starts in the background run on contexts of their own and
// may send requests before IncreaseSize has returned to its caller.
func countCalls(ctx context.Context) (context.Context, *atomic.Int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, callCounterKey{}, n), n
}

// callCountingTransport counts each request whose context carries a
// counter from countCalls.
type callCountingTransport struct{ next http.RoundTripper }

func (t callCountingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if n, ok := req.Context().Value(callCounterKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return t.next.RoundTrip(req)
}

// watch prints a line per pool whenever what the pools or the fake API
// report changes, until done.
func (d *demo) watch(ctx context.Context, done func() bool, pools ...*pool.Pool) error {
	began := time.Now()
	tick := time.NewTicker(d.t.sample)
	defer tick.Stop()
	last := ""
	for {
		finished := done()
		var lines []string
		for _, p := range pools {
			lines = append(lines, d.poolLine(p))
		}
		if now := strings.Join(lines, "\n"); now != last {
			last = now
			for i, l := range lines {
				if i == 0 {
					d.printf("   [%4.1fs] %s\n", time.Since(began).Seconds(), l)
				} else {
					d.printf("           %s\n", l)
				}
			}
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", pools[0].Name(), ctx.Err())
		case <-tick.C:
		}
	}
}

// poolLine is what the pool reports, next to the servers' status in the
// fake API.
func (d *demo) poolLine(p *pool.Pool) string {
	st := p.Status()
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s target %d", p.Name(), st.Target)
	for _, c := range []struct {
		n    int
		what string
	}{{st.Running, "running"}, {st.Creating, "creating"}, {st.Deleting, "deleting"}, {st.Failed, "failed"}} {
		if c.n > 0 {
			fmt.Fprintf(&b, ", %d %s", c.n, c.what)
		}
	}
	servers, _ := d.api.Servers(config.LabelNodeGroup + "=" + p.Name())
	byStatus := map[string]int{}
	for _, s := range servers {
		byStatus[string(s.Status)]++
	}
	return fmt.Sprintf("%-48s Hetzner: %s", b.String(), countsText(byStatus))
}

// countsText writes counts as "2 running, 1 starting", largest first.
func countsText(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

func (d *demo) summary(start time.Time, setupRequests int) {
	d.printf("\nSummary\n")
	tb := newTable(d.out, "  POOL", "SERVERS", "HETZNER")
	for _, p := range d.cluster.Pools() {
		servers, _ := d.api.Servers(config.LabelNodeGroup + "=" + p.Name())
		byStatus := map[string]int{}
		for _, s := range servers {
			byStatus[string(s.Status)]++
		}
		tb.row("  "+p.Name(), len(servers), countsText(byStatus))
	}
	tb.flush()

	counts := d.api.Counts()
	total := sum(counts)
	d.printf("\n  API requests: %d (%d to check the config and list servers, %d for the scenario)\n",
		total, setupRequests, total-setupRequests)
	tb = newTable(d.out)
	for _, k := range slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	}) {
		tb.row("    "+k, counts[k])
	}
	tb.flush()
	d.printf("  Action polls are batched, 50 actions a GET /actions, and timed by the durations seen so far.\n")
	rl := d.cluster.RateLimit()
	d.printf("  Rate-limit budget left: about %d of %d requests per hour\n", rl.Estimated, rl.Limit)
	d.printf("  Wall time: %s\n", since(start))
}

func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// since is the time since t, rounded for reading.
func since(t time.Time) time.Duration {
	d := time.Since(t)
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	default:
		return d.Round(100 * time.Millisecond)
	}
}
