package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	caerrors "sigs.k8s.io/cluster-autoscaler/pkg/utils/errors"
	"sigs.k8s.io/cluster-autoscaler/pkg/utils/gpu"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/nodelabel"
	"github.com/hcloudscale/hcloudscale/pool"
)

const (
	// DefaultName is what [Provider.Name] reports unless [WithName] sets
	// the name the provider is registered under.
	DefaultName = "hcloudscale"

	// GPULabel is the node label the autoscaler reads to tell GPU nodes
	// apart, the one the built-in Hetzner provider reports.
	GPULabel = "hcloud/gpu-node"

	// DefaultCallTimeout bounds the API work of one autoscaler call. It
	// equals the autoscaler's default --scan-interval, so that no call
	// holds its loop for longer than one period.
	DefaultCallTimeout = 10 * time.Second

	// DefaultCloseTimeout is how long [Provider.Cleanup] lets creates in
	// flight finish before it cancels them.
	DefaultCloseTimeout = 30 * time.Second
)

// labelTemplateNode marks the autoscaler's copies of template nodes.
const labelTemplateNode = "cluster-autoscaler.kubernetes.io/template-node"

// Provider is a [cloudprovider.CloudProvider] over an
// [hcloudscale.Cluster]: one [NodeGroup] per pool. Its methods are safe for
// concurrent use; the autoscaler calls NodeGroupForNode and DeleteNodes
// from its scale-down goroutines while its main loop runs.
type Provider struct {
	name    string
	cluster *hcloudscale.Cluster
	// groups holds the node groups of the Cluster's current generation
	// (hcloudscale.Cluster.Generation): pools come and go with its
	// configuration file.
	groups      atomic.Pointer[groupSet]
	groupMu     sync.Mutex // serialises rebuilds of groups
	limiter     *cloudprovider.ResourceLimiter
	log         *zap.Logger
	callTimeout time.Duration
	closeAfter  time.Duration

	// root is the parent of every call's context. The autoscaler's
	// interfaces carry no context, so this is the one place hcloudscale
	// keeps one; Cleanup cancels it.
	root   context.Context
	cancel context.CancelFunc

	// background counts the atomic scale-ups still waiting for their
	// servers; Cleanup waits for them.
	background sync.WaitGroup
	mu         sync.Mutex // guards closed, so that no scale-up joins background after Cleanup began
	closed     bool

	// labellerDone is closed when the node labeller has stopped; nil
	// without one.
	labellerDone chan struct{}

	cleanupOnce sync.Once
	cleanupErr  error
}

var (
	_ cloudprovider.CloudProvider = (*Provider)(nil)
	_ cloudprovider.NodeGroup     = (*NodeGroup)(nil)
	_ cloudprovider.PricingModel  = (*pricingModel)(nil)
)

// Option configures [New].
type Option func(*options)

type options struct {
	name         string
	env          config.Env
	limiter      *cloudprovider.ResourceLimiter
	logger       *zap.Logger
	clusterOpts  []hcloudscale.Option
	callTimeout  time.Duration
	closeTimeout time.Duration
	labelClient  kubernetes.Interface
	labelOpts    []nodelabel.Option
}

// WithName sets the name the provider reports ([DefaultName]); use the
// name it is registered under.
func WithName(name string) Option {
	return func(o *options) {
		if name != "" {
			o.name = name
		}
	}
}

// WithEnv reads the HCLOUD_* settings from env instead of the process
// environment and file system.
func WithEnv(env config.Env) Option {
	return func(o *options) { o.env = env }
}

// WithResourceLimiter sets what [Provider.GetResourceLimiter] returns: the
// autoscaler's cluster-wide limits (--cores-total, --memory-total). The
// default has no limits.
func WithResourceLimiter(rl *cloudprovider.ResourceLimiter) Option {
	return func(o *options) {
		if rl != nil {
			o.limiter = rl
		}
	}
}

// WithLogger sets the logger of the provider and its Cluster; the default
// discards everything. [Register] passes one that writes through klog.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithClusterOptions passes options to [hcloudscale.New], after the
// logger: a Prometheus registerer, a clock, client options.
func WithClusterOptions(opts ...hcloudscale.Option) Option {
	return func(o *options) { o.clusterOpts = append(o.clusterOpts, opts...) }
}

// WithCallTimeout bounds the API work of one autoscaler call
// ([DefaultCallTimeout]).
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.callTimeout = d
		}
	}
}

// WithCloseTimeout sets how long Cleanup lets creates in flight finish
// ([DefaultCloseTimeout]).
func WithCloseTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.closeTimeout = d
		}
	}
}

// WithNodeLabeller runs the node labeller (package nodelabel) with client
// until Cleanup: it adds each pool's labels and taints to the pool's
// nodes once they register, including the labels the kubelet may not set
// itself. client needs get, list, watch and update on nodes. [Register]
// enables it with the environment variable [EnvLabelNodes].
func WithNodeLabeller(client kubernetes.Interface, opts ...nodelabel.Option) Option {
	return func(o *options) {
		o.labelClient = client
		o.labelOpts = opts
	}
}

// New reads the configuration the built-in Hetzner provider reads (the
// HCLOUD_* environment variables and the --nodes specs in
// discovery.NodeGroupSpecs), checks it against the API with
// [hcloudscale.New] and returns a Provider. Every problem is returned at
// once, joined with [errors.Join], each naming its setting. ctx bounds
// the checks only; the Provider's own work ends with Cleanup.
//
// --node-group-auto-discovery is an error: pools are listed with --nodes
// (the built-in provider ignored auto-discovery specs silently).
func New(ctx context.Context, discovery cloudprovider.NodeGroupDiscoveryOptions, opts ...Option) (*Provider, error) {
	o := options{
		name:         DefaultName,
		env:          config.OSEnv(),
		logger:       zap.NewNop(),
		callTimeout:  DefaultCallTimeout,
		closeTimeout: DefaultCloseTimeout,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.limiter == nil {
		o.limiter = cloudprovider.NewResourceLimiter(nil, nil)
	}
	log := o.logger.Named("adapter")

	var errs []error
	if discovery.AutoDiscoverySpecified() {
		errs = append(errs, fmt.Errorf("--node-group-auto-discovery: not supported; list every pool with --nodes"))
	}
	cfg, err := config.Load(o.env, discovery.NodeGroupSpecs)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The Cluster logs the configuration's warnings and its own checks'
	// (Cluster.Warnings); only the label warnings are the adapter's.
	for _, w := range config.NodeLabelWarnings(cfg, o.labelClient != nil) {
		log.Warn(w)
	}
	// A configuration file is read again at Refresh (HCLOUD_CLUSTER_CONFIG_FILE,
	// such as a mounted ConfigMap): pools follow it without a restart.
	copts := append([]hcloudscale.Option{hcloudscale.WithLogger(o.logger),
		hcloudscale.WithConfigFileReload(o.env, discovery.NodeGroupSpecs, cfg)}, o.clusterOpts...)
	cluster, err := hcloudscale.New(ctx, cfg, copts...)
	if err != nil {
		return nil, err
	}

	p := &Provider{
		name:        o.name,
		cluster:     cluster,
		limiter:     o.limiter,
		log:         log,
		callTimeout: o.callTimeout,
		closeAfter:  o.closeTimeout,
	}
	// The root context keeps ctx's values but not its end: ctx bounds
	// the start only.
	p.root, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.groupSet()
	if o.labelClient != nil {
		l := nodelabel.New(o.labelClient, cluster, append([]nodelabel.Option{nodelabel.WithLogger(o.logger)}, o.labelOpts...)...)
		p.labellerDone = make(chan struct{})
		go func() {
			defer close(p.labellerDone)
			if err := l.Run(p.root); err != nil {
				log.Error("node labeller stopped", zap.Error(err))
			}
		}()
	}
	return p, nil
}

// startBackground registers work that Cleanup must wait for, or reports
// that Cleanup has begun.
func (p *Provider) startBackground() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.background.Add(1)
	return true
}

// call returns the context of one autoscaler call.
func (p *Provider) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.root, p.callTimeout)
}

// Cluster returns the Cluster the provider scales, for status and metrics.
func (p *Provider) Cluster() *hcloudscale.Cluster { return p.cluster }

// Name returns the name the provider was built with.
func (p *Provider) Name() string { return p.name }

// NodeGroups returns one node group per pool, in the order of the
// configuration ([hcloudscale.Cluster.Pools]), then the pools removed from
// it that still have nodes (min and max size 0; they only shrink). The
// autoscaler asks every loop, after Refresh, which applies a changed
// configuration file.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	gs := p.groupSet()
	out := make([]cloudprovider.NodeGroup, len(gs.list))
	for i, g := range gs.list {
		out[i] = g
	}
	return out
}

// groupSet is the node groups of one generation of the Cluster's pools.
type groupSet struct {
	generation uint64
	list       []*NodeGroup
	byPool     map[*pool.Pool]*NodeGroup
}

// groupSet returns the node groups of the Cluster's current pools,
// rebuilt after a change; a pool keeps its NodeGroup across rebuilds.
func (p *Provider) groupSet() *groupSet {
	gen := p.cluster.Generation()
	if gs := p.groups.Load(); gs != nil && gs.generation == gen {
		return gs
	}
	p.groupMu.Lock()
	defer p.groupMu.Unlock()
	old := p.groups.Load()
	if old != nil && old.generation == gen {
		return old
	}
	gs := &groupSet{generation: gen, byPool: map[*pool.Pool]*NodeGroup{}}
	for _, pl := range p.cluster.Pools() {
		g := (*NodeGroup)(nil)
		if old != nil {
			g = old.byPool[pl]
		}
		if g == nil {
			g = &NodeGroup{provider: p, pool: pl}
		}
		gs.list = append(gs.list, g)
		gs.byPool[pl] = g
	}
	p.groups.Store(gs)
	return gs
}

// NodeGroupForNode returns the node group of a node, from memory, or nil
// (and no error) for nodes that no pool owns: control-plane servers,
// Robot servers (hrobot://, hcloud://bm-), other providers' nodes.
// Besides real nodes it maps the autoscaler's fake nodes, whose name and
// provider ID are an instance ID ([pool.ClaimID] for a server still being
// created), and its template nodes by their hcloud/node-group label or the
// group in their name ([hcloudscale.Cluster.PoolForTemplateNode]), also
// copies of a real node whose server is gone.
func (p *Provider) NodeGroupForNode(node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	if g := p.groupForNode(node); g != nil {
		return g, nil
	}
	// An untyped nil: a nil *NodeGroup in the interface would look like
	// a node group to the autoscaler.
	return nil, nil
}

func (p *Provider) groupForNode(node *apiv1.Node) *NodeGroup {
	if node == nil {
		return nil
	}
	pl := p.cluster.PoolForNode(node.Spec.ProviderID, node.Name)
	if pl == nil {
		pl = p.cluster.PoolForTemplateNode(node.Name, node.Labels)
	}
	if pl == nil {
		return nil
	}
	return p.groupSet().byPool[pl]
}

// HasInstance reports whether the server behind a node exists. Servers of
// the pools are answered from the listing, other hcloud:// servers with
// one lookup cached for a few minutes.
//
// For a node whose provider ID names no Hetzner Cloud server (another
// provider, a Robot server, or no provider ID yet) it returns true with
// [cloudprovider.ErrNotImplemented], unwrapped: the autoscaler then
// counts the node as gone only if it carries its ToBeDeleted taint, as
// for providers without HasInstance. An API error is returned too (the
// autoscaler logs it and applies the same rule). The true that goes with
// every error keeps a caller that ignored the error from taking a node
// for deleted.
func (p *Provider) HasInstance(node *apiv1.Node) (bool, error) {
	ctx, cancel := p.call()
	defer cancel()
	ok, err := p.cluster.HasServer(ctx, node.Spec.ProviderID)
	switch {
	case errors.Is(err, hcloudscale.ErrNotHCloud):
		return true, cloudprovider.ErrNotImplemented
	case err != nil:
		return true, autoscalerError(err, "node %q: looking up its server", node.Name)
	}
	return ok, nil
}

// Pricing returns the price model of the pools, described under Pricing
// in the package documentation.
func (p *Provider) Pricing() (cloudprovider.PricingModel, caerrors.AutoscalerError) {
	return &pricingModel{provider: p}, nil
}

// GetAvailableMachineTypes returns the names of all server types in the
// catalogue, sorted. The autoscaler uses them only for node-group
// auto-provisioning, which hcloudscale does not offer.
func (p *Provider) GetAvailableMachineTypes() ([]string, error) {
	ctx, cancel := p.call()
	defer cancel()
	types, err := p.cluster.ServerTypes(ctx)
	if err != nil {
		return nil, autoscalerError(err, "server types")
	}
	names := make([]string, 0, len(types))
	for _, t := range types {
		if t.Name != "" {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// NewNodeGroup returns [cloudprovider.ErrNotImplemented]: pools are
// configured, not auto-provisioned.
func (p *Provider) NewNodeGroup(string, map[string]string, map[string]string, []apiv1.Taint, map[string]resource.Quantity) (cloudprovider.NodeGroup, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// GetResourceLimiter returns the limiter given with
// [WithResourceLimiter].
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// GPULabel returns [GPULabel].
func (p *Provider) GPULabel() string { return GPULabel }

// GetAvailableGPUTypes returns no types: Hetzner Cloud offers no GPU
// server types.
func (p *Provider) GetAvailableGPUTypes() map[string]struct{} {
	return map[string]struct{}{}
}

// GetNodeGpuConfig reports a node's GPU from its GPULabel and allocatable
// resources, the autoscaler's generic way.
func (p *Provider) GetNodeGpuConfig(node *apiv1.Node) *cloudprovider.GpuConfig {
	return gpu.GetNodeGPUFromCloudProvider(p, node)
}

// Refresh brings the server listing up to date when its TTL has passed
// (no request otherwise). The autoscaler calls it first in every loop and
// aborts the loop on an error, so a listing that takes longer than the
// call timeout goes on in the background and Refresh succeeds with the
// previous one. A failed listing is an error: creates and deletes would
// fail too.
func (p *Provider) Refresh() error {
	ctx, cancel := p.call()
	defer cancel()
	err := p.cluster.Refresh(ctx)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil && p.root.Err() == nil:
		p.log.Warn("server listing is slow; answering with the previous one", zap.Error(err))
	default:
		return autoscalerError(err, "refresh")
	}
	return nil
}

// Cleanup stops the provider: it cancels the root context of all calls,
// waits for atomic scale-ups in the background to finish their roll-back,
// and closes the Cluster, letting creates in flight finish for the close
// timeout. Later calls return the first result.
func (p *Provider) Cleanup() error {
	p.cleanupOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.background.Wait()
		if p.labellerDone != nil {
			<-p.labellerDone
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(p.root), p.closeAfter)
		defer cancel()
		p.cleanupErr = p.cluster.Close(ctx)
	})
	return p.cleanupErr
}
