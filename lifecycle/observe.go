package lifecycle

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/hcloudscale/hcloudscale/nodecache"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// observe reads what a plan is made from: the pools, their servers and
// drift from the Cluster's memory (a listing when its TTL passed), the
// catalogue's prices, and the nodes.
func (c *Controller) observe(ctx context.Context) (*world, error) {
	if err := c.cluster.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("refreshing the server listing: %w", err)
	}
	drift, err := c.cluster.Drift(ctx)
	if err != nil {
		// Pools whose image cannot be resolved now leave the image out.
		c.o.log.Debug("drift is partial", zap.Error(err))
	}
	types, err := c.cluster.ServerTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("server types: %w", err)
	}
	nodes, err := c.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.cluster.Config()
	w := &world{now: c.o.clock.Now(), cluster: cfg.Replace, price: priceFunc(types)}
	for _, p := range c.cluster.Pools() {
		pv := viewOf(p, drift[p.Name()])
		pv.hourly, pv.priced = w.price(p.Config().ServerType, p.Config().Location)
		w.pools = append(w.pools, pv)
	}
	w.indexNodes(nodes)
	return w, nil
}

func viewOf(p *pool.Pool, drift []pool.Drift) poolView {
	cfg := p.Config()
	pv := poolView{name: p.Name(), removed: p.Removed(), replace: cfg.Replace, taints: cfg.Taints, target: p.TargetSize(), max: p.MaxSize(),
		servers: p.Servers(), instances: p.Instances(), drift: map[int64][]pool.DriftReason{},
		family: cfg.FamilyName(), soldOut: !p.Available()}
	if live := offeringOut(p); live != nil {
		// An offering taken out of a configured pool's list: its nodes
		// are the pool's, never drained out as a removed pool's; with
		// drift offering they move back to an available one surge-first.
		lc := live.Config()
		pv.removed, pv.replace, pv.taints = false, lc.Replace, lc.Taints
		cfg = lc
	}
	if !pv.removed {
		pv.max = cfg.MaxSize // the pool's, across its offerings
	}
	if e := p.EarlierAvailable(); e != nil {
		pv.moveTo = e.Name()
	}
	for _, d := range drift {
		pv.drift[d.ServerID] = d.Reasons
	}
	for _, in := range pv.instances {
		if in.State == pool.Deleting {
			pv.deleting++
		}
	}
	return pv
}

// offeringOut returns a configured node group of p's pool when p is the
// group of an offering taken out of that pool's list; nil otherwise.
func offeringOut(p *pool.Pool) *pool.Pool {
	if !p.Removed() {
		return nil
	}
	for _, m := range p.Family() {
		if !m.Removed() {
			return m
		}
	}
	return nil
}

// listNodes lists the nodes: from the informer of Run once it has
// synced, else from the API server (its watch cache).
func (c *Controller) listNodes(ctx context.Context) ([]*corev1.Node, error) {
	c.mu.Lock()
	lister := c.nodeLister
	c.mu.Unlock()
	if lister != nil {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		return nodes, nil
	}
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// startInformer starts a node informer for Run's steps, or waits for the
// shared one of WithNodeCache, and wakes Run when a node registers, goes,
// or turns Ready or not (ready: schedulable and not being deleted too).
func (c *Controller) startInformer(ctx context.Context) {
	nodes := c.o.nodes
	if nodes == nil {
		nodes = nodecache.New(c.client, 10*time.Minute)
		nodes.Start(ctx)
	}
	reg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kick() },
		DeleteFunc: func(any) { c.kick() },
		UpdateFunc: func(before, after any) {
			b, okB := before.(*corev1.Node)
			a, okA := after.(*corev1.Node)
			if !okB || !okA || ready(b) != ready(a) {
				c.kick()
			}
		},
	})
	if err == nil {
		context.AfterFunc(ctx, func() { _ = nodes.Informer().RemoveEventHandler(reg) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}
	c.mu.Lock()
	c.nodeLister = nodes.Lister()
	c.mu.Unlock()
}

func (w *world) indexNodes(nodes []*corev1.Node) {
	w.nodes = make(map[int64]*corev1.Node, len(nodes))
	w.byName = make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		w.byName[n.Name] = n
		if id := serverIDOfNode(n); id != 0 {
			w.nodes[id] = n
		}
	}
}

func priceFunc(types []*servercache.ServerType) func(string, string) (float64, bool) {
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	return func(serverType, location string) (float64, bool) {
		t := byName[serverType]
		if t == nil {
			return 0, false
		}
		l, ok := t.Locations[location]
		return l.PriceHourlyNet, ok && l.HasPrice
	}
}
