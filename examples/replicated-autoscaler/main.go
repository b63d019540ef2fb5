// Command replicated-autoscaler keeps one Hetzner Cloud pool at a fixed
// size, run as several replicas of which only the holder of a Kubernetes
// Lease writes: the library's fencedleader package, in a few lines.
//
//	export HCLOUD_TOKEN=... HCLOUD_CLUSTER_CONFIG_FILE=cluster-config.json KUBECONFIG=...
//	go run ./examples/replicated-autoscaler --nodes=0:20:cpx31:fsn1:workers --size=3 --identity=replica-a
//	go run ./examples/replicated-autoscaler --nodes=0:20:cpx31:fsn1:workers --size=3 --identity=replica-b
//
// Each replica decides every --interval, under the leadership context and
// inside the Leader's gate: a standby decides nothing, and a replica that
// stops leading has every write refused at the fence, whatever it was
// doing. On SIGTERM the leader hands the Lease over as soon as its writes
// have their answers; a replica that loses the Lease exits with 1, to be
// restarted as a standby. In a pod, $POD_NAMESPACE and $POD_NAME give the
// Lease's namespace and the identity; the service account needs get,
// create and update on the Lease.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/fencedleader"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "replicated-autoscaler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("replicated-autoscaler", flag.ContinueOnError)
	nodes := fs.String("nodes", "", "the pool, as "+config.NodeSpecFormat)
	size := fs.Int("size", 1, "the pool's size to keep")
	interval := fs.Duration("interval", 10*time.Second, "time between two decisions")
	lc := fencedleader.DefaultConfig(os.Getenv("POD_NAMESPACE"), "replicated-autoscaler", os.Getenv("POD_NAME"))
	fs.StringVar(&lc.Namespace, "lease-namespace", lc.Namespace, "namespace of the Lease")
	fs.StringVar(&lc.Name, "lease-name", lc.Name, "name of the Lease")
	fs.StringVar(&lc.Identity, "identity", lc.Identity, "this replica's name in the Lease, its own")
	fs.DurationVar(&lc.LeaseDuration, "lease-duration", lc.LeaseDuration, "see fencedleader.Config")
	fs.DurationVar(&lc.RenewDeadline, "renew-deadline", lc.RenewDeadline, "see fencedleader.Config")
	fs.DurationVar(&lc.RetryPeriod, "retry-period", lc.RetryPeriod, "see fencedleader.Config")
	fs.DurationVar(&lc.WriteGrace, "write-grace", lc.WriteGrace, "see fencedleader.Config")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes == "" || *interval <= 0 {
		return errors.New("--nodes is required, --interval must be positive")
	}
	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	cfg, err := config.LoadFromOS([]string{*nodes})
	if err != nil {
		return err
	}
	kube, err := kubeClient()
	if err != nil {
		return err
	}

	// One writer: the Leader is the Cluster's fence, and lists the
	// servers before it lets the first write through.
	lead, err := fencedleader.New(lc, kube, fencedleader.WithLogger(log))
	if err != nil {
		return err
	}
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithFence(lead), hcloudscale.WithResumeWhen(lead.Leading))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Close(cctx)
	}()
	if err := lead.CheckAccess(ctx); err != nil {
		return err
	}
	if err := lead.Start(ctx, lead.ClusterHooks(c)); err != nil {
		return err
	}
	// Before the Cluster closes: the next replica resumes what is left.
	defer lead.HandOver(time.Minute)
	return loop(ctx, lead, c, *size, *interval, log)
}

// loop decides once per interval until ctx ends or the Lease is lost.
func loop(ctx context.Context, lead *fencedleader.Leader, c *hcloudscale.Cluster, size int, interval time.Duration, log *zap.Logger) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-lead.Lost():
			return fmt.Errorf("lost the Lease: %w", lead.Err())
		case <-tick.C:
		}
		if err := step(lead, c, size); err != nil && !errors.Is(err, fencedleader.ErrNotLeader) {
			log.Warn("scaling step failed", zap.Error(err))
		}
	}
}

// step tops the pool up to size, if this replica leads.
func step(lead *fencedleader.Leader, c *hcloudscale.Cluster, size int) error {
	leave, err := lead.Enter()
	if err != nil {
		return err
	}
	defer leave()
	ctx := lead.Context()
	if err := c.Refresh(ctx); err != nil {
		return err
	}
	p := c.Pools()[0]
	if missing := min(size, p.MaxSize()) - p.TargetSize(); missing > 0 {
		return p.IncreaseSize(ctx, missing)
	}
	return nil
}

// kubeClient is the client of $KUBECONFIG, else of the pod's service
// account.
func kubeClient() (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}
