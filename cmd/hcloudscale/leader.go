package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/fencedleader"
)

// leaderFlags are the leader-election flags of serve; the names and
// defaults are those of the Cluster Autoscaler's own.
type leaderFlags struct {
	enabled bool
	cfg     fencedleader.Config
}

// leaderFlagNames names the Config fields by their flags.
var leaderFlagNames = map[string]string{
	"Namespace":     "--leader-elect-resource-namespace",
	"Name":          "--leader-elect-resource-name",
	"Identity":      "--leader-elect-identity",
	"LeaseDuration": "--leader-elect-lease-duration",
	"RenewDeadline": "--leader-elect-renew-deadline",
	"RetryPeriod":   "--leader-elect-retry-period",
	"WriteGrace":    "--leader-elect-write-grace",
}

func (l *leaderFlags) register(fs *flag.FlagSet) {
	c := &l.cfg
	fs.BoolVar(&l.enabled, "leader-elect", false, "run as one of several replicas: only the holder of a Kubernetes Lease creates and deletes servers; "+
		"the others answer reads and refuse Refresh and changes with Unavailable (needs the pod's service account, allowed to get, create and update the Lease)")
	fs.StringVar(&c.Namespace, "leader-elect-resource-namespace", "", "namespace of the Lease (empty: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&c.Name, "leader-elect-resource-name", "hcloudscale", "name of the Lease")
	fs.StringVar(&c.Identity, "leader-elect-identity", "", "this replica's name in the Lease, its own (empty: $POD_NAME, else the host name with a random suffix)")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", fencedleader.DefaultLeaseDuration, "how long after the leader's last renewal a standby may take the Lease over; whole seconds, 2s or more")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", fencedleader.DefaultRenewDeadline,
		"how long after its last renewal the leader writes; with one retry period at most the lease duration less 1s less a tenth")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", fencedleader.DefaultRetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.DurationVar(&c.WriteGrace, "leader-elect-write-grace", fencedleader.DefaultWriteGrace, "the longest the Hetzner API may take to carry out a request it has received, positive: "+
		"a replica that takes the Lease over from another waits this long before it lists servers, and a write whose answer was lost keeps the Lease this long before it is released")
}

// check reports every problem of the leader-election flags, naming them.
// The namespace and identity, filled in later, are not checked.
func (l *leaderFlags) check() []error {
	c := l.cfg
	c.Namespace, c.Identity = "-", "-"
	err := c.Validate()
	if err == nil {
		return nil
	}
	return fencedleader.Rename(err, func(s string) string { return leaderFlagNames[s] })
}

// kubeRESTConfig is the Kubernetes client configuration of serve, for
// the Lease and the node labeller: the --kubeconfig file, else the file
// $KUBECONFIG names, else the pod's service account.
func kubeRESTConfig(kubeconfig string, env config.Env) (*rest.Config, error) {
	if kubeconfig == "" && env.Lookup != nil {
		kubeconfig, _ = env.Lookup("KUBECONFIG")
	}
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("no --kubeconfig or $KUBECONFIG, and not in a pod with a service account token: %w", err)
	}
	cfg.UserAgent = "hcloudscale"
	return cfg, nil
}

// newKubeClient returns the client for the Lease. Tests replace it with a
// fake clientset.
var newKubeClient = func(kubeconfig string, env config.Env) (kubernetes.Interface, error) {
	cfg, err := kubeRESTConfig(kubeconfig, env)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// leadership is serve's leader: a fencedleader.Leader, and the
// connections a standby closes. A nil *leadership (no --leader-elect)
// is the sole writer: every method lets everything through.
type leadership struct {
	*fencedleader.Leader
	conns *connTracker
}

// newLeadership returns the leadership of a serve process, or nil without
// --leader-elect. The hcloudscale_leader gauge is registered either way:
// a replica without leader election is the sole writer.
func newLeadership(f leaderFlags, kubeconfig string, env config.Env, reg prometheus.Registerer, log *zap.Logger) (*leadership, error) {
	var l *leadership
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hcloudscale_leader",
		Help: "1 while this replica may create and delete servers: it holds the Lease by its own clock (last renewal younger than the renew deadline), or runs without --leader-elect.",
	}, func() float64 {
		if l.leads() {
			return 1
		}
		return 0
	})
	if err := reg.Register(gauge); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if !f.enabled {
		return nil, nil
	}
	cfg, err := leaderConfig(f.cfg, env)
	if err != nil {
		return nil, err
	}
	client, err := newKubeClient(kubeconfig, env)
	if err != nil {
		return nil, fmt.Errorf("--leader-elect: %w", err)
	}
	lead, err := fencedleader.New(cfg, client, fencedleader.WithLogger(log))
	if err != nil {
		return nil, errors.Join(fencedleader.Rename(err, func(s string) string { return leaderFlagNames[s] })...)
	}
	l = &leadership{Leader: lead, conns: &connTracker{conns: map[string]net.Conn{}}}
	return l, nil
}

// leaderConfig fills in the namespace and identity from the pod.
func leaderConfig(c fencedleader.Config, env config.Env) (fencedleader.Config, error) {
	lookup := func(name string) string {
		if env.Lookup == nil {
			return ""
		}
		v, _ := env.Lookup(name)
		return v
	}
	if c.Namespace == "" {
		c.Namespace = lookup("POD_NAMESPACE")
	}
	if c.Namespace == "" {
		c.Namespace = "kube-system"
	}
	if c.Identity == "" {
		c.Identity = lookup("POD_NAME")
	}
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("--leader-elect-identity: empty, and no host name: %w", err)
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Identity = host + "_" + hex.EncodeToString(b[:])
	}
	return c, nil
}

// leaderContext is the leadership context the node lifecycle's
// Kubernetes writes run under: done the moment this replica stops leading.
// Without leader election (nil l) it never ends.
func (l *leadership) leaderContext() context.Context {
	if l == nil {
		return context.Background()
	}
	return l.Context()
}

// leads reports whether this replica may change servers now.
func (l *leadership) leads() bool { return l == nil || l.Leading() }

// fence returns l as the Cluster's write fence; nil without leader
// election, which lets every write through.
func (l *leadership) fence() hcloudscale.Fence {
	if l == nil {
		return nil
	}
	return l.Leader
}

// gate returns l as an externalgrpc Gate; a nil l gives a nil Gate, which
// lets every call in.
func (l *leadership) gate() externalgrpc.Gate {
	if l == nil {
		return nil
	}
	return l.Leader
}

// start checks access to the Lease and starts the election, with the
// Cluster's hooks.
func (l *leadership) start(ctx context.Context, cluster *hcloudscale.Cluster) error {
	if l == nil {
		return nil
	}
	if err := l.CheckAccess(ctx); err != nil {
		return fmt.Errorf("--leader-elect: %w; grant it to the service account, or set --leader-elect-resource-name and "+
			"--leader-elect-resource-namespace to the Lease its Role names", err)
	}
	return l.Start(ctx, l.ClusterHooks(cluster))
}

// lost is closed when this replica stopped leading without being asked;
// nil (never ready) without leader election.
func (l *leadership) lost() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.Lost()
}

// handOver gives the Lease up on SIGTERM as soon as it is safe.
func (l *leadership) handOver(timeout time.Duration) {
	if l != nil {
		l.HandOver(timeout)
	}
}

// stop ends the election and the standby's connection closing.
func (l *leadership) stop() {
	if l == nil {
		return
	}
	l.Stop()
	l.conns.closeAll()
}
