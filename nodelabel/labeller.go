package nodelabel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Annotation marks a node the labeller has handled; its value is the
// node's pool. A node that carries it is never changed again, so labels
// and taints removed by hand stay removed. Remove the annotation to have
// the pool's labels and taints added again.
const Annotation = "hcloudscale/labelled"

// Defaults of the options.
const (
	// DefaultResync is how often every node is looked at again: a node
	// that registered before its server was in the Cluster's listing is
	// handled at the next resync after the listing shows it.
	DefaultResync = time.Minute
	// DefaultBackoff and DefaultMaxBackoff bound the wait before a failed
	// update of a node is tried again; it doubles with each failure.
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 5 * time.Minute
)

// Pools finds the pool of a node; *hcloudscale.Cluster is one. A nil
// result means the node belongs to none of the pools.
type Pools interface {
	PoolForNode(providerID, nodeName string) *pool.Pool
}

// Labeller adds the labels and taints of their pool to the nodes of the
// pools. See the package documentation.
type Labeller struct {
	client kubernetes.Interface
	pools  Pools
	opts   options
	log    *zap.Logger
}

// Option configures [New].
type Option func(*options)

type options struct {
	logger              *zap.Logger
	resync              time.Duration
	backoff, maxBackoff time.Duration
	clock               clock.WithTicker
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithResync sets how often every node is looked at again
// ([DefaultResync]).
func WithResync(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.resync = d
		}
	}
}

// WithBackoff sets the first and the longest wait before a failed update
// is tried again ([DefaultBackoff], [DefaultMaxBackoff]).
func WithBackoff(first, longest time.Duration) Option {
	return func(o *options) {
		if first > 0 && longest >= first {
			o.backoff, o.maxBackoff = first, longest
		}
	}
}

// WithClock sets the clock of the resyncs and the retry backoff, for
// tests.
func WithClock(c clock.WithTicker) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// New returns a Labeller that changes nodes through client. It does no
// I/O; [Labeller.Run] does the work.
func New(client kubernetes.Interface, pools Pools, opts ...Option) *Labeller {
	o := options{
		logger:     zap.NewNop(),
		resync:     DefaultResync,
		backoff:    DefaultBackoff,
		maxBackoff: DefaultMaxBackoff,
		clock:      clock.RealClock{},
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &Labeller{client: client, pools: pools, opts: o, log: o.logger.Named("nodelabel")}
}

// Run watches the nodes and labels those of the pools until ctx ends. It
// returns nil then, or an error when the node informer cannot start
// (such as missing permissions to list and watch nodes, reported once the
// first listing fails).
func (l *Labeller) Run(ctx context.Context) error {
	if l.client == nil || l.pools == nil {
		return errors.New("nodelabel: client and pools are required")
	}
	// The informer does not resync: the labeller's own ticker offers the
	// nodes again, on its clock.
	factory := informers.NewSharedInformerFactoryWithOptions(l.client, 0)
	nodes := factory.Core().V1().Nodes()
	informer := nodes.Informer()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](l.opts.backoff, l.opts.maxBackoff),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: l.opts.clock},
	)
	// pending holds the nodes queued, in hand or waiting for their
	// backoff: resyncs and the nodes' own status updates must not queue
	// them again, which would cut a backoff short.
	var (
		mu      sync.Mutex // guards pending
		pending = map[string]bool{}
	)
	offer := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok || l.poolOf(node) == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !pending[node.Name] {
			pending[node.Name] = true
			queue.Add(node.Name)
		}
	}
	settled := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		delete(pending, name)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    offer,
		UpdateFunc: func(_, obj any) { offer(obj) },
	}); err != nil {
		return fmt.Errorf("nodelabel: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer queue.ShutDown()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil
	}
	l.log.Info("labelling the nodes of the pools", zap.Duration("resync", l.opts.resync))
	lister := nodes.Lister()
	ticker := l.opts.clock.NewTicker(l.opts.resync)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C():
				all, _ := lister.List(labels.Everything())
				for _, n := range all {
					offer(n)
				}
			}
		}
	})
	for l.next(ctx, queue, lister, settled) {
	}
	return nil
}

// next handles one queued node; it returns false once the queue is shut
// down. settled is called when the node is done with, until it is
// offered again.
func (l *Labeller) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], lister corelisters.NodeLister, settled func(string)) bool {
	name, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(name)
	err := l.label(ctx, lister, name)
	switch {
	case err == nil:
		queue.Forget(name)
		settled(name)
	case ctx.Err() != nil:
	default:
		l.log.Warn("labelling node failed; trying again later", zap.String("node", name),
			zap.Int("failures", queue.NumRequeues(name)+1), zap.Error(err))
		queue.AddRateLimited(name)
	}
	return true
}

// poolOf returns the pool of a node the labeller has yet to handle, or nil.
// Nodes of other providers are never looked up; a node without a provider
// ID yet is looked up by name, as the autoscaler does.
func (l *Labeller) poolOf(node *corev1.Node) *pool.Pool {
	if _, done := node.Annotations[Annotation]; done {
		return nil
	}
	if id := node.Spec.ProviderID; id != "" {
		if _, ok := servercache.ParseProviderID(id); !ok {
			return nil
		}
	}
	p := l.pools.PoolForNode(node.Spec.ProviderID, node.Name)
	if p == nil {
		return nil
	}
	// A pool without labels and taints has nothing to add, ever.
	if cfg := p.Config(); len(cfg.Labels) == 0 && len(cfg.Taints) == 0 {
		return nil
	}
	return p
}

// label adds the missing labels and taints of its pool to a node, with
// the annotation, in one update; the update fails on a conflict with a
// change made since the informer saw the node, and is tried again.
func (l *Labeller) label(ctx context.Context, lister corelisters.NodeLister, name string) error {
	node, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	p := l.poolOf(node)
	if p == nil {
		return nil
	}
	cfg := p.Config()
	node = node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	var added, kept []string
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		v, ok := node.Labels[k]
		switch {
		case !ok:
			node.Labels[k] = cfg.Labels[k]
			added = append(added, k)
		case v != cfg.Labels[k]:
			kept = append(kept, k)
		}
	}
	var taints []string
	for _, t := range cfg.Taints {
		if !slices.ContainsFunc(node.Spec.Taints, func(n corev1.Taint) bool { return n.Key == t.Key && n.Effect == t.Effect }) {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			taints = append(taints, t.ToString())
		}
	}
	node.Annotations[Annotation] = cfg.Name
	if _, err := l.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	fields := []zap.Field{zap.String("node", name), zap.String("pool", cfg.Name), zap.Strings("labels", added), zap.Strings("taints", taints)}
	if len(kept) > 0 {
		fields = append(fields, zap.Strings("kept_labels", kept))
	}
	l.log.Info("node labelled", fields...)
	return nil
}
