// Package nodecache is one informer cache of the cluster's Nodes for all
// consumers of a process (serve's node labeller and node lifecycle), which
// keeps of each Node only what they read.
//
// A Node's JSON is 10-25 KB, most of it the images the kubelet reports
// (status.images) and the managed fields; at 5,000 Nodes two full caches
// are hundreds of MiB. The cache keeps the metadata (minus managedFields),
// the spec and the status conditions, and drops the rest of the status.
// The labeller updates Nodes from this copy: an update of a Node ignores
// its status (a subresource) and keeps the managed fields when the request
// carries none, so nothing is lost by the stripping.
package nodecache

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Cache is a shared, stripped informer cache of the Nodes.
type Cache struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.NodeLister
}

// New returns a Cache of the Nodes client lists and watches, resynced
// every resync (0: never). It does no I/O: [Cache.Start] starts it.
func New(client kubernetes.Interface, resync time.Duration) *Cache {
	f := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(Strip))
	nodes := f.Core().V1().Nodes()
	return &Cache{factory: f, informer: nodes.Informer(), lister: nodes.Lister()}
}

// Start starts the informer until ctx ends; it does not wait.
func (c *Cache) Start(ctx context.Context) { c.factory.Start(ctx.Done()) }

// Shutdown waits for the informer to stop after ctx ended.
func (c *Cache) Shutdown() { c.factory.Shutdown() }

// Informer is the shared informer, for event handlers.
func (c *Cache) Informer() cache.SharedIndexInformer { return c.informer }

// Lister lists the cached Nodes; treat them as read-only.
func (c *Cache) Lister() corelisters.NodeLister { return c.lister }

// Strip is the cache's transform: it keeps a Node's metadata without
// managedFields, its spec and its status conditions.
func Strip(obj any) (any, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if _, err := Strip(d.Obj); err != nil {
			return nil, err
		}
		return d, nil
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions}
	return n, nil
}
