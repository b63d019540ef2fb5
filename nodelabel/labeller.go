package nodelabel

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/nodecache"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Annotation marks a node the labeller has handled; its value is the
// node's pool. Remove it to have all the pool's labels and taints added
// again.
const Annotation = "hcloudscale/labelled"

// AppliedAnnotation records which of the pool's labels (by key) and taints
// (by key and effect) the labeller has handled on a node, as JSON:
// {"labels":["workload"],"taints":["gpu:NoSchedule"]}. Only those of the
// pool that it does not list are added, so a label removed by hand stays
// removed while one added to the pool's config reaches the node.
const AppliedAnnotation = "hcloudscale/labelled-keys"

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
	nodes               *nodecache.Cache
}

// WithNodeCache has the labeller share a node cache that its owner starts
// and stops (serve shares one with the node lifecycle); without it Run
// keeps a cache of its own.
func WithNodeCache(c *nodecache.Cache) Option {
	return func(o *options) { o.nodes = c }
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
	nodes := l.nodeCache()
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
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    offer,
		UpdateFunc: func(_, obj any) { offer(obj) },
	})
	if err != nil {
		return fmt.Errorf("nodelabel: %w", err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()
	if l.opts.nodes == nil {
		nodes.Start(ctx)
		defer nodes.Shutdown()
	}
	defer queue.ShutDown()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
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

// nodeCache is the shared cache of WithNodeCache, else one of Run's own.
// It does not resync: the labeller's own ticker offers the nodes again,
// on its clock.
func (l *Labeller) nodeCache() *nodecache.Cache {
	if l.opts.nodes != nil {
		return l.opts.nodes
	}
	return nodecache.New(l.client, 0)
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
	if id := node.Spec.ProviderID; id != "" {
		if _, ok := servercache.ParseProviderID(id); !ok {
			return nil
		}
	}
	p := l.pools.PoolForNode(node.Spec.ProviderID, node.Name)
	if p == nil {
		return nil
	}
	// Nothing to do when every label and taint of the pool was handled
	// and the record lists no other: the rule is the same for a pool
	// that never had labels and taints and for one whose config changed.
	labels, taints := recorded(node)
	if want := configured(p.Config()); labels == nil && len(want.Labels)+len(want.Taints) == 0 ||
		labels != nil && slices.Equal(want.Labels, keys(labels)) && slices.Equal(want.Taints, keys(taints)) {
		return nil
	}
	return p
}

// applied is the value of AppliedAnnotation.
type applied struct {
	Labels []string `json:"labels"`
	Taints []string `json:"taints"`
}

// configured is what the pool's config asks for, sorted.
func configured(cfg config.Pool) applied {
	a := applied{Labels: slices.Sorted(maps.Keys(cfg.Labels)), Taints: []string{}}
	for _, t := range cfg.Taints {
		a.Taints = append(a.Taints, taintKey(t))
	}
	slices.Sort(a.Taints)
	a.Taints = slices.Compact(a.Taints)
	return a
}

func taintKey(t corev1.Taint) string { return t.Key + ":" + string(t.Effect) }

// recorded returns the labels and taints the labeller has handled on the
// node; nil labels for a node it has not handled (no Annotation). A node
// handled by a version that recorded nothing counts as handled for the
// pool's labels and taints it carries.
func recorded(node *corev1.Node) (labels, taints map[string]bool) {
	if _, ok := node.Annotations[Annotation]; !ok {
		return nil, nil
	}
	labels, taints = map[string]bool{}, map[string]bool{}
	var a applied
	if raw, ok := node.Annotations[AppliedAnnotation]; ok && json.Unmarshal([]byte(raw), &a) == nil {
		for _, k := range a.Labels {
			labels[k] = true
		}
		for _, k := range a.Taints {
			taints[k] = true
		}
		return labels, taints
	}
	for k := range node.Labels {
		labels[k] = true
	}
	for _, t := range node.Spec.Taints {
		taints[taintKey(t)] = true
	}
	return labels, taints
}

func keys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

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
	// Only what the labeller has not handled on this node before: what
	// was removed by hand stays removed. A label or taint the node has
	// with another value is the node's: kept, and logged.
	doneLabels, doneTaints := recorded(node)
	// A NoExecute taint evicts the pods that do not tolerate it at once:
	// it is added only at a node's first labelling, before workloads land.
	first := doneLabels == nil && !ready(node)
	var added, kept []string
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		if doneLabels[k] {
			continue
		}
		v, ok := node.Labels[k]
		switch {
		case !ok:
			node.Labels[k] = cfg.Labels[k]
			added = append(added, k)
		case v != cfg.Labels[k]:
			kept = append(kept, k)
		}
	}
	taints, keptTaints, runningTaints := addTaints(node, cfg.Taints, doneTaints, first)
	record, err := json.Marshal(configured(cfg))
	if err != nil {
		return err
	}
	node.Annotations[Annotation] = cfg.Name
	node.Annotations[AppliedAnnotation] = string(record)
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
	if len(keptTaints) > 0 {
		fields = append(fields, zap.Strings("kept_taints", keptTaints))
	}
	l.log.Info("node labelled", fields...)
	if len(runningTaints) > 0 {
		l.log.Warn("NoExecute taints of the pool not added to a node that already runs: they would evict its pods at once; "+
			"the node gets them when it is replaced", zap.String("node", name), zap.String("pool", cfg.Name), zap.Strings("taints", runningTaints))
	}
	return nil
}

// addTaints adds to node the taints of the pool it lacks and has not
// handled (done), but a NoExecute one unless this is the node's first
// labelling before it runs (first). It returns the taints added, the
// node's own taints kept (same key and effect, another value) and the
// NoExecute taints left out because the node runs.
func addTaints(node *corev1.Node, want []corev1.Taint, done map[string]bool, first bool) (added, kept, running []string) {
	for _, t := range want {
		if done[taintKey(t)] {
			continue
		}
		i := slices.IndexFunc(node.Spec.Taints, func(n corev1.Taint) bool { return n.Key == t.Key && n.Effect == t.Effect })
		switch {
		case i < 0 && t.Effect == corev1.TaintEffectNoExecute && !first:
			running = append(running, t.ToString())
		case i < 0:
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			added = append(added, t.ToString())
		case node.Spec.Taints[i].Value != t.Value:
			kept = append(kept, node.Spec.Taints[i].ToString())
		}
	}
	return added, kept, running
}

// ready reports whether a node's Ready condition is True. A node that has
// not been Ready since it registered runs no workload: the node lifecycle
// controller keeps the node.kubernetes.io/not-ready:NoSchedule taint on it
// and the scheduler places no pod there but those that tolerate that
// taint (DaemonSet pods), which a taint of the pool is meant to keep off
// as well.
func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
