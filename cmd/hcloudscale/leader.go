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
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/pool"
)

// leaderFlags are the leader-election flags of serve; the names and
// defaults are those of the Cluster Autoscaler's own.
type leaderFlags struct {
	enabled       bool
	namespace     string
	name          string
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	writeGrace    time.Duration
}

// writeMargin is the part of the lease duration a write may not use: a
// write must be written whole by the lease's expiry less a tenth of the
// lease duration, by the leader's own clock, so that a clock of a standby
// running up to 10% fast still finds the Lease held until then.
func (l *leaderFlags) writeMargin() time.Duration { return l.leaseDuration / 10 }

func (l *leaderFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.enabled, "leader-elect", false, "run as one of several replicas: only the holder of a Kubernetes Lease creates and deletes servers; "+
		"the others answer reads and refuse Refresh and changes with Unavailable (needs the pod's service account, allowed to get, create and update the Lease)")
	fs.StringVar(&l.namespace, "leader-elect-resource-namespace", "", "namespace of the Lease (empty: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&l.name, "leader-elect-resource-name", "hcloudscale", "name of the Lease")
	fs.StringVar(&l.identity, "leader-elect-identity", "", "this replica's name in the Lease (empty: $POD_NAME, else the host name with a random suffix)")
	fs.DurationVar(&l.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long after the leader's last renewal a standby may take the Lease over")
	fs.DurationVar(&l.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops leading; below the lease duration")
	fs.DurationVar(&l.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the Lease")
	fs.DurationVar(&l.writeGrace, "leader-elect-write-grace", 5*time.Second, "the longest the Hetzner API may take to carry out a request it has received: "+
		"a replica that takes the Lease over from another waits this long before it lists servers, and a write whose answer was lost keeps the Lease this long before it is released")
}

// check reports every problem of the leader-election flags.
func (l *leaderFlags) check() []error {
	var errs []error
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"leader-elect-lease-duration", l.leaseDuration}, {"leader-elect-renew-deadline", l.renewDeadline}, {"leader-elect-retry-period", l.retryPeriod}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s %s: must be positive", d.name, d.value))
		}
	}
	if l.renewDeadline >= l.leaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s: must be below --leader-elect-lease-duration %s, "+
			"so that a leader that cannot renew stops before a standby takes over", l.renewDeadline, l.leaseDuration))
	}
	if l.renewDeadline < l.leaseDuration && l.renewDeadline > l.leaseDuration-l.writeMargin() {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s: must leave a tenth of --leader-elect-lease-duration %s to the writes let through last (at most %s)",
			l.renewDeadline, l.leaseDuration, l.leaseDuration-l.writeMargin()))
	}
	if float64(l.renewDeadline) <= leaderelection.JitterFactor*float64(l.retryPeriod) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s: must exceed %.1f × --leader-elect-retry-period %s",
			l.renewDeadline, leaderelection.JitterFactor, l.retryPeriod))
	}
	if l.writeGrace < 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-write-grace %s: must not be negative", l.writeGrace))
	}
	if l.name == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name: must not be empty"))
	}
	return errs
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
		return nil, fmt.Errorf("--leader-elect: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// errNotLeader is why a standby refuses a change.
var errNotLeader = errors.New("this replica is a standby")

// leadership decides, for serve with --leader-elect, whether this
// replica may change servers. It is the externalgrpc Gate for changes and
// the Cluster's write Fence for every request that changes servers.
//
// The invariant: this replica sends a request that changes servers only
// while it holds the Lease by its own monotonic clock, that is, while its
// last successful renewal started less than --leader-elect-renew-deadline
// ago. A standby takes the Lease over only --leader-elect-lease-duration
// after it saw the last renewal, later than that, so the two never write
// at the same time, whatever pauses, partitions or failed renewals come
// between:
//
//   - The check is made at the one place every such request passes, just
//     before it goes to the network (hcloudscale.WithFence): no retry,
//     rate-limit hold or resumed create flow is sent without it. A paused
//     process that wakes finds its renewal old and sends nothing until a
//     renewal succeeds; changes (IncreaseSize, DeleteNodes,
//     DecreaseTargetSize) are refused on the same condition.
//   - It writes only after a listing made after it acquired the Lease, so
//     it counts every server the previous leader created.
//   - It never gives the Lease up while a write may still be sent: the
//     release (on SIGTERM, or by client-go after failed renewals) first
//     closes the fence and waits until every write let through has its
//     answer. A write that is still unanswered by then keeps the Lease
//     held until it expires.
//   - On SIGTERM it stops letting changes in, drops the claims whose
//     create request was not sent, waits for the answers of the writes in
//     flight and releases the Lease at once: the next leader resumes the
//     create flows this one leaves unfinished.
//   - When renewals fail past the renew deadline it stops writing, drops
//     unsent claims and exits with an error: like the autoscaler, a
//     replica that lost the Lease restarts as a standby.
type leadership struct {
	cfg      leaderFlags
	identity string
	cluster  *hcloudscale.Cluster
	log      *zap.Logger
	now      func() time.Time // the monotonic clock of the fence; time.Now outside tests

	mu      sync.Mutex // guards the fields below
	leading bool       // changes may start (after the first listing, until demote)
	holder  string     // the last leader seen, "" before the first
	inside  int        // changes let in and not yet left
	left    *sync.Cond // broadcast when inside, writes or starting drop
	stopped bool       // stop was called: losing the Lease is expected

	renewed     time.Time // when the last successful acquire or renewal was sent; zero: never
	renewedWall time.Time // the same by the wall clock, which a suspended VM's monotonic clock may not count
	writable    bool      // the fence is open: set when leading starts, cleared for good by closeFence
	writes      int       // writes let through the fence and not yet ended
	// unknownUntil is when the last write whose answer was lost can no
	// longer take effect: it ended then plus --leader-elect-write-grace.
	// The Lease is not released before.
	unknownUntil time.Time
	// observed is the holder in the last Lease this replica read, and
	// tookOver whether it acquired the Lease from another holder (not a
	// released or new one): then it waits out the write grace first.
	observed string
	tookOver bool

	lostCh   chan struct{} // closed when the Lease was lost while not stopping
	lostOnce sync.Once

	// starting counts the OnStartedLeading callbacks running, which
	// client-go starts in goroutines of their own; finished (under mu)
	// turns away those that start after stop.
	starting int
	finished bool

	// leadCtx lives while this replica leads (leaderContext); leadEnd
	// cancels it, and staleTimer fires when the last renewal becomes
	// older than the renew deadline.
	leadCtx    context.Context
	leadEnd    context.CancelFunc
	staleTimer *time.Timer

	conns   *connTracker
	cancel  context.CancelFunc // stops the elector
	running sync.WaitGroup     // the elector
}

// newLeadership returns the leadership of a serve process, or nil without
// --leader-elect. The hcloudscale_leader gauge is registered either way:
// a replica without leader election is the sole writer.
func newLeadership(f leaderFlags, env config.Env, reg prometheus.Registerer, log *zap.Logger) (*leadership, error) {
	var l *leadership
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hcloudscale_leader",
		Help: "1 while this replica may create and delete servers: it holds the Lease by its own clock (last renewal younger than the renew deadline), or runs without --leader-elect.",
	}, func() float64 {
		if l == nil || l.leads() {
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
	lookup := func(name string) string {
		if env.Lookup == nil {
			return ""
		}
		v, _ := env.Lookup(name)
		return v
	}
	if f.namespace == "" {
		f.namespace = lookup("POD_NAMESPACE")
	}
	if f.namespace == "" {
		f.namespace = "kube-system"
	}
	id := f.identity
	if id == "" {
		id = lookup("POD_NAME")
	}
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--leader-elect-identity: empty, and no host name: %w", err)
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		id = host + "_" + hex.EncodeToString(b[:])
	}
	l = &leadership{
		cfg:      f,
		identity: id,
		log:      log.Named("leader").With(zap.String("identity", id)),
		now:      time.Now,
		lostCh:   make(chan struct{}),
		conns:    &connTracker{conns: map[string]net.Conn{}},
	}
	l.left = sync.NewCond(&l.mu)
	return l, nil
}

// freshLocked reports whether the last successful renewal was sent less
// than the renew deadline ago, by the monotonic clock.
func (l *leadership) freshLocked() bool {
	return !l.renewed.IsZero() && l.sinceRenewalLocked() < l.cfg.renewDeadline
}

// sinceRenewalLocked is the time since the last successful renewal was
// sent: by the monotonic clock, or by the wall clock when that says more
// (a suspended VM whose monotonic clock stood still, or a wall clock set
// forward: either way the safe side).
func (l *leadership) sinceRenewalLocked() time.Duration {
	d := l.now().Sub(l.renewed)
	if !l.renewedWall.IsZero() {
		d = max(d, time.Now().Round(0).Sub(l.renewedWall))
	}
	return d
}

// notLeaderLocked is why a change or a write is refused now.
func (l *leadership) notLeaderLocked() error {
	switch {
	case l.leading && !l.freshLocked():
		return fmt.Errorf("%w; its last renewal of the Lease was %s ago, not within the renew deadline %s",
			errNotLeader, l.sinceRenewalLocked().Round(time.Millisecond), l.cfg.renewDeadline)
	case l.holder == "" || l.holder == l.identity:
		return fmt.Errorf("%w; no leader is known yet", errNotLeader)
	}
	return fmt.Errorf("%w; the leader is %s", errNotLeader, l.holder)
}

// Enter lets a change in while this replica leads.
func (l *leadership) Enter() (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading || !l.freshLocked() {
		return nil, l.notLeaderLocked()
	}
	l.inside++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.inside--
			if l.inside == 0 {
				l.left.Broadcast()
			}
			l.mu.Unlock()
		})
	}, nil
}

// AllowWrite is the Cluster's write fence (hcloudscale.Fence): a request
// that changes servers passes while the fence is open and the Lease was
// renewed within the renew deadline. Its permit lets it be written until
// the Lease's expiry less the write margin, by this replica's clock, and
// only while the fence stays open; a write whose answer is lost holds the
// Lease for the write grace after it ended.
func (l *leadership) AllowWrite() (hcloudscale.Permit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writable {
		return hcloudscale.Permit{}, fmt.Errorf("%w; it does not lead", errNotLeader)
	}
	if !l.freshLocked() {
		return hcloudscale.Permit{}, l.notLeaderLocked()
	}
	l.writes++
	left := l.cfg.leaseDuration - l.cfg.writeMargin() - l.sinceRenewalLocked()
	var once sync.Once
	return hcloudscale.Permit{
		// The transport measures by time.Now: the time left, not l.now.
		Deadline: time.Now().Add(left),
		Check:    l.checkWrite,
		Done:     func(answered bool) { once.Do(func() { l.writeEnded(answered) }) },
	}, nil
}

// checkWrite is asked before each write of a request's bytes: the fence
// is open and the Lease's expiry less the margin is still ahead.
func (l *leadership) checkWrite() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writable {
		return fmt.Errorf("%w; the fence closed", errNotLeader)
	}
	if since := l.sinceRenewalLocked(); since >= l.cfg.leaseDuration-l.cfg.writeMargin() {
		return fmt.Errorf("%w; its last renewal of the Lease was %s ago: the Lease may expire before the write is carried out",
			errNotLeader, since.Round(time.Millisecond))
	}
	return nil
}

// writeEnded counts a write out; one whose answer was lost may still be
// carried out by the API within the write grace.
func (l *leadership) writeEnded(answered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes--
	if !answered {
		if until := l.now().Add(l.cfg.writeGrace); until.After(l.unknownUntil) {
			l.unknownUntil = until
		}
		l.log.Warn("a request that changes servers ended without an answer: the Lease is kept until the API can no longer carry it out",
			zap.Duration("write_grace", l.cfg.writeGrace))
	}
	l.left.Broadcast()
}

// closeFence turns every later write away and waits until the writes let
// through have ended and those whose answer was lost are past the write
// grace, or ctx ends (an error then: a write may still take effect).
func (l *leadership) closeFence(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writable = false
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.left.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	for {
		wait := l.unknownUntil.Sub(l.now())
		if l.writes == 0 && wait <= 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d requests that change servers still in flight, %s until those without an answer can no longer take effect: %w",
				l.writes, max(wait, 0).Round(time.Millisecond), ctx.Err())
		}
		if l.writes == 0 {
			t := time.AfterFunc(wait, func() {
				l.mu.Lock()
				l.left.Broadcast()
				l.mu.Unlock()
			})
			l.left.Wait()
			t.Stop()
			continue
		}
		l.left.Wait()
	}
}

// renewedAt records a successful acquire or renewal sent at t (and at
// wall by the wall clock).
func (l *leadership) renewedAt(t, wall time.Time) {
	l.mu.Lock()
	if t.After(l.renewed) {
		l.renewed, l.renewedWall = t, wall
	}
	l.watchStaleLocked()
	l.mu.Unlock()
}

// leaderContext returns a context that lives while this replica leads and
// is cancelled the moment it stops: demoted, or its last renewal older
// than the renew deadline. It is cancelled already while the replica does
// not lead. Without leader election (nil l) it never ends.
func (l *leadership) leaderContext() context.Context {
	if l == nil {
		return context.Background()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading || !l.freshLocked() {
		l.endLeadLocked()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	if l.leadCtx == nil || l.leadCtx.Err() != nil {
		l.leadCtx, l.leadEnd = context.WithCancel(context.Background())
	}
	l.watchStaleLocked()
	return l.leadCtx
}

// watchStaleLocked ends the leader context when the last renewal passes
// the renew deadline without a newer one. l.mu must be held.
func (l *leadership) watchStaleLocked() {
	if l.leadCtx == nil || l.leadCtx.Err() != nil {
		return
	}
	left := l.cfg.renewDeadline - l.sinceRenewalLocked()
	if l.staleTimer != nil {
		l.staleTimer.Stop()
	}
	l.staleTimer = time.AfterFunc(max(left, 0), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.freshLocked() {
			l.endLeadLocked()
		}
	})
}

// endLeadLocked cancels the leader context. l.mu must be held.
func (l *leadership) endLeadLocked() {
	if l.leadEnd != nil {
		l.leadEnd()
	}
	if l.staleTimer != nil {
		l.staleTimer.Stop()
	}
}

// leads reports whether this replica leads now, by its own clock.
func (l *leadership) leads() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading && l.freshLocked()
}

// fence returns l as the Cluster's write fence; nil without leader
// election, which lets every write through.
func (l *leadership) fence() hcloudscale.Fence {
	if l == nil {
		return nil
	}
	return l
}

// gate returns l as an externalgrpc Gate; a nil l gives a nil Gate, which
// lets every call in.
func (l *leadership) gate() externalgrpc.Gate {
	if l == nil {
		return nil
	}
	return l
}

// demote stops letting changes in and waits until those inside have
// left. Changes are bounded by --rpc-timeout.
func (l *leadership) demote() {
	if l == nil {
		return
	}
	l.mu.Lock()
	was := l.leading
	l.leading = false
	l.endLeadLocked()
	// left is also broadcast when a start callback ends or a write is
	// answered; the loop condition tells them apart.
	for l.inside > 0 {
		l.left.Wait()
	}
	l.mu.Unlock()
	if was {
		l.log.Info("stopped leading: changes are refused")
	}
}

// handOver gives the Lease up on SIGTERM as soon as it is safe: no change
// starts, the claims whose create request was not sent are dropped, and
// once every write sent has its answer (or timeout passed) the Lease is
// released, so that the next replica leads at once and resumes the
// create flows left unfinished.
func (l *leadership) handOver(timeout time.Duration) {
	if l == nil {
		return
	}
	l.demote()
	l.dropUnsent(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.closeFence(ctx); err != nil {
		l.log.Warn("handing over: the Lease is kept until it expires", zap.Error(err))
	}
	l.stop()
}

// lost is closed when this replica lost the Lease without being asked to
// stop; nil (never ready) without leader election.
func (l *leadership) lost() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.lostCh
}

// startLeaderElection starts the election of lead, if any, with the
// Kubernetes client of --kubeconfig, $KUBECONFIG or the pod. It fails
// when the client may not get, create or update the Lease.
func startLeaderElection(ctx context.Context, lead *leadership, kubeconfig string, env config.Env) error {
	if lead == nil {
		return nil
	}
	client, err := newKubeClient(kubeconfig, env)
	if err != nil {
		return err
	}
	if err := lead.checkAccess(ctx, client); err != nil {
		return err
	}
	return lead.start(ctx, client)
}

// leaseVerbs are what the elector does with the Lease.
var leaseVerbs = []string{"get", "create", "update"}

// checkAccess asks the API server whether this replica may get, create
// and update its Lease, so that missing RBAC is an error at start rather
// than a standby that never leads.
func (l *leadership) checkAccess(ctx context.Context, client kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for _, verb := range leaseVerbs {
		name := l.cfg.name
		if verb == "create" {
			// The API server authorizes a create before it reads the
			// object's name: a rule limited to names never allows it.
			name = ""
		}
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: l.cfg.namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name,
			},
		}}
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("--leader-elect: checking access to Lease %s in namespace %s: %w", l.cfg.name, l.cfg.namespace, err)
		}
		if !res.Status.Allowed {
			errs = append(errs, fmt.Errorf("--leader-elect: may not %s Lease %q in namespace %q (coordination.k8s.io leases); "+
				"grant it to the service account, or set --leader-elect-resource-name and --leader-elect-resource-namespace to the Lease its Role names",
				verb, l.cfg.name, l.cfg.namespace))
		}
	}
	return errors.Join(errs...)
}

// start runs the election in the background until stop. The Lease is
// released by stop, or by client-go after failed renewals, each time
// only once the fence is closed and every write let through has its
// answer (fencedLock).
func (l *leadership) start(ctx context.Context, client kubernetes.Interface) error {
	if l == nil {
		return nil
	}
	lock := &fencedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: l.cfg.name, Namespace: l.cfg.namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.identity},
	}, l: l}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            "hcloudscale",
		LeaseDuration:   l.cfg.leaseDuration,
		RenewDeadline:   l.cfg.renewDeadline,
		RetryPeriod:     l.cfg.retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				l.mu.Lock()
				if l.finished {
					l.mu.Unlock()
					return
				}
				l.starting++
				l.mu.Unlock()
				defer func() {
					l.mu.Lock()
					l.starting--
					l.left.Broadcast()
					l.mu.Unlock()
				}()
				l.startLeading(ctx)
			},
			OnStoppedLeading: l.stoppedLeading,
			OnNewLeader:      l.newLeader,
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ectx = klog.NewContext(ectx, logr.New(&zapSink{log: l.log}))
	l.cancel = cancel
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		le.Run(ectx)
	}()
	l.log.Info("standing by for the Lease", zap.String("lease", l.cfg.namespace+"/"+l.cfg.name))
	return nil
}

// fencedLock is the Lease lock of the elector. It records when each
// successful acquire or renewal of this replica was sent, which is what
// the fence measures against, and it holds a release back until the
// fence is closed and every write let through has its answer.
type fencedLock struct {
	resourcelock.Interface
	l *leadership
}

// Get reads the Lease and remembers its holder, so that an acquisition
// knows whether it takes the Lease over from another replica.
func (f *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := f.Interface.Get(ctx)
	if err == nil && rec != nil {
		f.l.mu.Lock()
		f.l.observed = rec.HolderIdentity
		f.l.mu.Unlock()
	}
	return rec, raw, err
}

func (f *fencedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent, wall := f.l.now(), time.Now().Round(0)
	err := f.Interface.Create(ctx, rec)
	if err == nil && rec.HolderIdentity == f.l.identity {
		f.l.renewedAt(sent, wall)
	}
	return err
}

func (f *fencedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == "" {
		// client-go releases the Lease: after stop, or after renewals
		// failed for the renew deadline.
		if err := f.l.closeFence(ctx); err != nil {
			return fmt.Errorf("not releasing the Lease: %w", err)
		}
		return f.Interface.Update(ctx, rec)
	}
	sent, wall := f.l.now(), time.Now().Round(0)
	err := f.Interface.Update(ctx, rec)
	if err == nil && rec.HolderIdentity == f.l.identity {
		f.l.mu.Lock()
		if prev := f.l.observed; prev != "" && (prev != f.l.identity || f.l.renewed.IsZero()) {
			// Taken over from a holder that did not release it (another
			// replica, or this one before a restart of its container,
			// which keeps the pod's name): its writes may still be
			// carried out.
			f.l.tookOver = true
		}
		f.l.observed = rec.HolderIdentity
		f.l.mu.Unlock()
		f.l.renewedAt(sent, wall)
	}
	return err
}

// startLeading lists the servers afresh, then lets changes and writes in.
// A listing that fails is retried until it succeeds or leadership ends:
// changes checked against a listing from before the previous leader's
// last creates could pass the max size.
func (l *leadership) startLeading(ctx context.Context) {
	if !l.waitOutOldWrites(ctx) {
		return
	}
	l.log.Info("acquired the Lease; listing servers before leading")
	for {
		err := l.cluster.RefreshNow(ctx)
		if err == nil {
			break
		}
		l.log.Warn("listing servers failed; retrying before leading", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.cfg.retryPeriod):
		}
	}
	l.mu.Lock()
	if ctx.Err() != nil || l.stopped {
		l.mu.Unlock()
		return
	}
	l.leading, l.writable = true, true
	l.holder = l.identity
	l.mu.Unlock()
	// Finish the create flows the previous leader left unfinished, now
	// that this replica may change servers.
	l.cluster.Resume()
	l.log.Info("leading: changes are let in")
}

// waitOutOldWrites waits the write grace after taking the Lease over from
// a replica that did not release it: a write it sent before its Lease
// expired may be carried out until then, and the listing must show it.
// A released Lease needs no wait: the releasing replica waited out its
// own writes first. It reports false when ctx ended meanwhile.
func (l *leadership) waitOutOldWrites(ctx context.Context) bool {
	l.mu.Lock()
	took := l.tookOver
	l.tookOver = false
	l.mu.Unlock()
	if !took || l.cfg.writeGrace <= 0 {
		return true
	}
	l.log.Info("took the Lease over: waiting out the previous leader's writes before listing servers", zap.Duration("write_grace", l.cfg.writeGrace))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(l.cfg.writeGrace):
		return true
	}
}

// stoppedLeading runs when the elector ends, whether or not it led.
func (l *leadership) stoppedLeading() {
	l.mu.Lock()
	stopped, was := l.stopped, l.leading
	l.writable = false
	l.mu.Unlock()
	l.demote()
	if !stopped {
		if was {
			l.log.Error("lost the Lease: no change starts any more")
		}
		l.lostOnce.Do(func() { close(l.lostCh) })
	}
}

func (l *leadership) newLeader(id string) {
	l.mu.Lock()
	l.holder = id
	l.mu.Unlock()
	if id != l.identity {
		l.log.Info("another replica leads", zap.String("leader", id))
	}
}

// stop ends the election and, if this replica holds the Lease, releases
// it (once the fence is closed and the writes in flight are answered).
func (l *leadership) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.demote()
	if l.cancel != nil {
		l.cancel()
	}
	l.running.Wait()
	// The elector's context has ended, so startLeading returns soon.
	l.mu.Lock()
	l.finished = true
	for l.starting > 0 {
		l.left.Wait()
	}
	l.mu.Unlock()
	l.conns.closeAll()
}

// dropUnsent removes, in every pool, the claims whose create request has
// not been sent: once this replica stops leading, sending one would be a
// change made without the Lease. The fence would refuse it anyway; this
// makes the pools' target sizes say so at once.
func (l *leadership) dropUnsent(ctx context.Context) {
	for _, p := range l.cluster.Pools() {
		// A decrease larger than the claims removes every unsent claim
		// (and the placeholders of failed ones, which this process
		// forgets anyway).
		if err := p.DecreaseTargetSize(ctx, -(p.MaxSize() + 1)); err != nil && !errors.Is(err, pool.ErrFenced) {
			l.log.Warn("dropping unsent claims", zap.String("pool", p.Name()), zap.Error(err))
		}
	}
}

// listener tracks the connections lis accepts, so that a standby can
// close the autoscaler's connection (see interceptor).
func (l *leadership) listener(lis net.Listener) net.Listener {
	if l == nil {
		return lis
	}
	return &trackingListener{Listener: lis, t: l.conns}
}

// interceptors are the gRPC interceptors of a replica with leader
// election: when a standby refuses Refresh, it also closes the
// connection the call came on, a second after the answer. The autoscaler
// abandons that loop; its gRPC client reconnects through the Service,
// which picks a replica anew, until it reaches the leader.
func (l *leadership) interceptors() []grpc.UnaryServerInterceptor {
	if l == nil {
		return nil
	}
	refresh := "/" + protos.CloudProvider_ServiceDesc.ServiceName + "/Refresh"
	return []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		res, err := handler(ctx, req)
		if err != nil && info.FullMethod == refresh {
			l.mu.Lock()
			leading := l.leading
			l.mu.Unlock()
			if p, ok := peer.FromContext(ctx); ok && !leading {
				l.conns.closeLater(p.Addr.String(), time.Second)
			}
		}
		return res, err
	}}
}

// connTracker holds the accepted connections by remote address.
type connTracker struct {
	mu     sync.Mutex // guards conns and timers
	conns  map[string]net.Conn
	timers []*time.Timer
}

func (t *connTracker) closeLater(addr string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.conns[addr]
	if !ok {
		return
	}
	t.timers = append(t.timers, time.AfterFunc(d, func() {
		t.mu.Lock()
		delete(t.conns, addr)
		t.mu.Unlock()
		_ = c.Close()
	}))
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tm := range t.timers {
		tm.Stop()
	}
	t.timers = nil
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	addr := c.RemoteAddr().String()
	l.t.mu.Lock()
	l.t.conns[addr] = c
	l.t.mu.Unlock()
	return &trackedConn{Conn: c, t: l.t, addr: addr}, nil
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	addr string
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	if c.t.conns[c.addr] == c.Conn {
		delete(c.t.conns, c.addr)
	}
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// zapSink passes client-go's leader-election log to zap: its info lines at
// debug level (our own callbacks log the transitions), its errors as
// warnings.
type zapSink struct {
	log *zap.Logger
}

func (s *zapSink) Init(logr.RuntimeInfo) {}
func (s *zapSink) Enabled(int) bool      { return s.log.Core().Enabled(zap.DebugLevel) }
func (s *zapSink) Info(_ int, msg string, kv ...any) {
	s.log.Debug(msg, zap.Any("client_go", kv))
}

func (s *zapSink) Error(err error, msg string, kv ...any) {
	s.log.Warn(msg, zap.Error(err), zap.Any("client_go", kv))
}
func (s *zapSink) WithValues(kv ...any) logr.LogSink {
	return &zapSink{log: s.log.With(zap.Any("client_go", kv))}
}
func (s *zapSink) WithName(string) logr.LogSink { return s }
