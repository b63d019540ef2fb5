package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

func replaceHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale replace --plan [flags]
       hcloudscale replace --abort [flags]

--plan shows what the node lifecycle (serve --replace-nodes) would do now: per
pool and node, why it is due (drift:<reason>, expired, removed_pool,
repair:not_ready), whether its replacement starts now, is in progress (and its
phase) or what blocks it (a window, a budget, the pool's max size, a pod or a
PodDisruptionBudget, a pause, the pool's last stop within retryAfter), and the
hourly price of the replacement against the server it
replaces, at current prices. Nothing is changed. It reads the servers from the
Hetzner API (one listing) and the nodes, pods and budgets from Kubernetes.

--abort ends what the lifecycle left, once it is turned off (serve without
--replace-nodes does the same at its start): a replacement whose old node was
drained and whose replacement is Ready is finished (the old server deleted);
every other one is rolled back: the old node uncordoned, the lifecycle's
annotations removed, the replacement deleted when it holds nothing but
DaemonSet pods, else kept without its scale-down protection. A live node is
never deleted unless its replacement is Ready. Run it only while no serve
--replace-nodes runs. It reports what it did to each node.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 the plan was shown or the abort done, 1 failure (reported on stderr), 2 bad usage.",
			"hcloudscale replace --plan --cluster-config cluster-config.json -o json",
			"KUBECONFIG=~/.kube/config hcloudscale replace --plan --nodes=1:5:cpx22:fsn1:workers",
			"hcloudscale replace --abort --cluster-config cluster-config.json")
	}
}

func runReplace(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("replace", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	output := outputFlag(fs)
	plan := fs.Bool("plan", false, "show the plan (replacements run in serve --replace-nodes)")
	abort := fs.Bool("abort", false, "finish or roll back every replacement the lifecycle left (it must be off)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file`; empty: the file $KUBECONFIG names, else the pod's service account")
	if code, ok := parseFlags(fs, args, stdout, stderr, replaceHelp(fs)); !ok {
		return code
	}
	if *plan == *abort {
		return usageError(stderr, "replace", errors.New("give one of --plan and --abort: nodes are replaced by serve --replace-nodes, which holds the leader Lease"))
	}
	log, cfg, code := cf.load(stderr, "replace", *output, env)
	if code != 0 {
		return code
	}
	client, err := kubeClient(*kubeconfig, env)
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale replace: %v\n", err)
		return exitFailure
	}
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithLenientChecks(), hcloudscale.WithoutResume())
	if err != nil {
		return reportConfigError(stderr, "replace", "checking the configuration against the API", err)
	}
	defer func() { _ = closeCluster(c, time.Second) }()
	ctrl, err := lifecycle.New(c, client, lifecycle.WithLogger(log), lifecycle.WithDryRun(true))
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale replace: %v\n", err)
		return exitFailure
	}
	defer ctrl.Close()
	if *abort {
		return runAbort(ctx, ctrl, *output, stdout, stderr)
	}
	p, err := ctrl.Plan(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale replace: %v\n", err)
		return exitFailure
	}
	if *output == outputJSON {
		if err := writeJSON(stdout, p); err != nil {
			fmt.Fprintf(stderr, "hcloudscale replace: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printReplacePlan(stdout, p)
	return exitOK
}

// runAbort is replace --abort: RollBack, and a line per node.
func runAbort(ctx context.Context, ctrl *lifecycle.Controller, output string, stdout, stderr io.Writer) int {
	undone, err := ctrl.RollBack(ctx)
	if output == outputJSON {
		if undone == nil {
			undone = []lifecycle.Undone{}
		}
		if werr := writeJSON(stdout, undone); werr != nil {
			fmt.Fprintf(stderr, "hcloudscale replace: %v\n", werr)
			return exitFailure
		}
	} else {
		printUndone(stdout, undone)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale replace: --abort: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func printUndone(w io.Writer, undone []lifecycle.Undone) {
	if len(undone) == 0 {
		fmt.Fprintln(w, "Nothing of the node lifecycle is left.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tNODE\tREPLACEMENT\tDONE\tERROR")
	for _, u := range undone {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Pool, u.Node, u.Replacement, u.Action, u.Error)
	}
	_ = tw.Flush()
}

// rollBackLeftovers runs RollBack in the background while the process
// leads, once per interval until a pass finds nothing left: serve
// without --replace-nodes ends what a lifecycle turned off left. Without
// a Kubernetes client it does nothing.
func rollBackLeftovers(ctx context.Context, f *serveFlags, env config.Env, b *backend) (stop func()) {
	client, err := kubeClient(f.labels.kubeconfig, env)
	if err != nil {
		b.log.Debug("no Kubernetes client: not looking for what a node lifecycle left", zap.Error(err))
		return func() {}
	}
	ctrl, err := lifecycle.New(b.cluster, client, lifecycle.WithLogger(b.log),
		lifecycle.WithLeader(func() bool { return b.lead == nil || b.lead.leads() }))
	if err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(f.replace.interval)
		defer t.Stop()
		for {
			undone, err := ctrl.RollBack(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				b.log.Warn("could not end what the node lifecycle left; trying again", zap.Error(err))
			case err == nil && len(undone) == 0 && (b.lead == nil || b.lead.leads()):
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { cancel(); wg.Wait(); ctrl.Close() }
}

func kubeClient(kubeconfig string, env config.Env) (kubernetes.Interface, error) {
	rc, err := kubeRESTConfig(kubeconfig, env)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client configuration: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// printReplacePlan writes a plan as a table, one row per node.
func printReplacePlan(w io.Writer, p *lifecycle.Plan) {
	if len(p.Steps) == 0 {
		fmt.Fprintln(w, "No node is due for replacement.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tNODE\tREASONS\tNOW\tPRICE/H OLD→NEW\tDETAIL")
	for _, st := range p.Steps {
		now, detail := st.State, strings.Join(st.Blocked, "; ")
		switch st.State {
		case lifecycle.StateInProgress:
			now, detail = "in progress: "+string(st.Phase), "replacement "+st.Replacement
			if st.Replacement == "" {
				detail = "drained out (removed pool)"
			}
		case lifecycle.StateStart:
			now = "starts"
			if st.Surge {
				detail = "surges above the pool's max size"
			}
		}
		if st.Into != "" && st.State != lifecycle.StateBlocked {
			detail = strings.TrimPrefix(detail+"; into node group "+st.Into, "; ")
		}
		price := "unknown"
		if st.PriceKnown {
			price = fmt.Sprintf("%.4f→%.4f", st.HourlyOld, st.HourlyNew)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Pool, st.Node, strings.Join(st.Reasons, ","), now, price, detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d start now, %d blocked, %d in progress.\n", p.Count(lifecycle.StateStart), p.Count(lifecycle.StateBlocked), p.Count(lifecycle.StateInProgress))
}

// replaceFlags are serve's flags of the node lifecycle.
type replaceFlags struct {
	enabled  bool
	dryRun   bool
	interval time.Duration
}

func (r *replaceFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.enabled, "replace-nodes", false, "run the node lifecycle: replace the nodes of pools that enable it in the cluster config (replace), surge-first and drained through the Eviction API; needs --leader-elect with more than one replica, and the RBAC of the chart's nodeLifecycle")
	fs.BoolVar(&r.dryRun, "replace-dry-run", false, "with --replace-nodes: plan, log and count only; nothing is created, cordoned, evicted or deleted")
	fs.DurationVar(&r.interval, "replace-interval", lifecycle.DefaultInterval, "the longest time between two steps of the node lifecycle (it also steps when a node registers, turns Ready or goes, a drain ends or an old server's delete ends)")
}

// runLifecycle runs a Controller on the backend's Cluster until the
// returned stop is called (or ctx ends).
func runLifecycle(ctx context.Context, f *replaceFlags, client kubernetes.Interface, b *backend, opts []lifecycle.Option) (stop func(), err error) {
	if !f.enabled {
		return func() {}, nil
	}
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("--replace-nodes: listing nodes: %w", err)
	}
	bc := record.NewBroadcaster()
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "hcloudscale"})
	opts = append(opts, lifecycle.WithLogger(b.log), lifecycle.WithDryRun(f.dryRun), lifecycle.WithInterval(f.interval),
		lifecycle.WithEventRecorder(rec), lifecycle.WithLeader(b.lead.leads),
		lifecycle.WithLeaderContext(b.lead.leaderContext))
	ctrl, err := lifecycle.New(b.cluster, client, opts...)
	if err != nil {
		bc.Shutdown()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = ctrl.Run(ctx) })
	b.log.Info("node lifecycle started", zap.Bool("dry_run", f.dryRun), zap.Duration("interval", f.interval))
	return func() {
		cancel()
		wg.Wait()
		ctrl.Close()
		bc.Shutdown()
	}, nil
}
