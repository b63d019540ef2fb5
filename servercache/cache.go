package servercache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/config"
)

// pageSize is the largest page the API serves.
const pageSize = 50

// ServerLister is the part of hcloud.ServerClient that a [Cache] uses:
// one page of servers and its pagination.
type ServerLister interface {
	List(ctx context.Context, opts hcloud.ServerListOpts) ([]*hcloud.Server, *hcloud.Response, error)
}

var _ ServerLister = (*hcloud.ServerClient)(nil)

// Cache holds a [Snapshot] of the cluster's servers, from one label-selected
// listing per TTL. Its methods are safe for concurrent use.
type Cache struct {
	client   ServerLister
	selector string
	cluster  string
	budget   int
	clock    clock.Clock
	refresh  *refresher

	snap atomic.Pointer[Snapshot] // written only under mu; read without it

	mu sync.Mutex // guards listing and journal, and serialises writers of snap
	// listing is true while a listing is in flight; our own mutations
	// made meanwhile go to journal and are re-applied on top of its
	// result, which may predate them.
	listing bool
	journal []mutation

	gone departed // servers Remove dropped, for Departed
}

// New returns a Cache that lists servers with client, which is usually
// (*hcloud.Client).Server. It does no I/O: the first [Cache.Get] lists.
func New(client ServerLister, opts ...Option) *Cache {
	o := newOptions(opts)
	ttl := o.ttl
	if ttl == 0 {
		ttl = DefaultTTL
	}
	c := &Cache{
		client:   client,
		selector: selector(o.clusterName),
		cluster:  o.clusterName,
		budget:   o.budget,
		clock:    o.clock,
	}
	c.refresh = newRefresher("servers", ttl, o, o.logger.Named("servercache"), c.list)
	return c
}

// selector scopes the listing to one cluster both ways: a named cluster
// sees only servers with its label, an unnamed one only servers without
// any cluster label (those of named clusters are not its own).
func selector(cluster string) string {
	if cluster == "" {
		return config.LabelNodeGroup + ",!" + config.LabelCluster
	}
	return config.LabelNodeGroup + "," + config.LabelCluster + "=" + cluster
}

// Selector returns the label selector of the listings: "hcloud/node-group",
// plus ",hcloudscale/cluster=<name>" with [WithClusterName], or
// ",!hcloudscale/cluster" without.
func (c *Cache) Selector() string {
	return c.selector
}

// Get returns the current snapshot, listing first when there is none yet
// or it has expired. Concurrent callers share one listing. A caller whose
// ctx ends stops waiting and gets ctx.Err() wrapped, while the listing
// continues for the others, bounded by [WithListTimeout].
//
// After a failed listing, Get returns that error without listing again for
// a few seconds (5 s, then 10 s, or the TTL if shorter); [Cache.Current] still has the last snapshot.
func (c *Cache) Get(ctx context.Context) (*Snapshot, error) {
	if err := c.refresh.ensure(ctx, false); err != nil {
		return nil, err
	}
	return c.snap.Load(), nil
}

// Refresh lists now, unless a listing is already in flight, which it
// joins; that listing's result still carries every Upsert and Remove made
// before it ends.
func (c *Cache) Refresh(ctx context.Context) (*Snapshot, error) {
	if err := c.refresh.ensure(ctx, true); err != nil {
		return nil, err
	}
	return c.snap.Load(), nil
}

// Current returns the last snapshot without I/O, nil before the first
// successful listing. It may be expired.
func (c *Cache) Current() *Snapshot {
	return c.snap.Load()
}

// StaleSince returns since when the snapshot has been kept past its
// expiry because listings failed; zero while it is fresh. [Cache.Current]
// serves it all that time.
func (c *Cache) StaleSince() time.Time {
	return c.refresh.stale()
}

// ExpiresAt returns when the current snapshot expires, the zero time when
// the next Get lists anyway.
func (c *Cache) ExpiresAt() time.Time {
	return c.refresh.expiry()
}

// Invalidate makes the next Get list, also when a listing is in flight
// (its result is used, but is not fresh) or a failure backoff is running.
func (c *Cache) Invalidate() {
	c.refresh.invalidate()
}

// Close stops a listing in flight and waits for it to end. Get and Refresh
// return [ErrClosed] afterwards; Current, Upsert and Remove keep working.
func (c *Cache) Close() {
	c.refresh.close()
}

// Upsert adds or replaces servers in the snapshot at once, so that our own
// creates and status changes are visible without a listing. A server
// without a pool leaves the snapshot, like a server without the pool label
// in a listing; a server with a non-positive ID is ignored. Before the
// first listing there is no snapshot to change, and that listing will see
// the servers.
func (c *Cache) Upsert(servers ...Server) {
	if len(servers) == 0 {
		return
	}
	c.apply(mutation{upserts: append([]Server(nil), servers...)})
}

// Remove drops servers from the snapshot at once; call it when our own
// delete has completed.
func (c *Cache) Remove(ids ...int64) {
	if len(ids) == 0 {
		return
	}
	c.gone.record(c.snap.Load(), ids, c.clock.Now())
	c.apply(mutation{removes: append([]int64(nil), ids...)})
}

func (c *Cache) apply(m mutation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listing {
		c.journal = append(c.journal, m)
	}
	if s := c.snap.Load(); s != nil {
		c.snap.Store(s.with(m))
	}
}

// list is the refresher's fetch: one paged listing, indexed, with the
// journal re-applied.
func (c *Cache) list(ctx context.Context) (fetched, error) {
	c.mu.Lock()
	c.listing, c.journal = true, nil
	c.mu.Unlock()

	fetchedAt := c.clock.Now()
	raw, requests, err := c.listAll(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	journal := c.journal
	c.listing, c.journal = false, nil
	if err != nil {
		return fetched{}, fmt.Errorf("listing servers with label selector %q: %w", c.selector, err)
	}
	servers, ignored := c.convert(raw)
	snap := newSnapshot(servers, fetchedAt)
	for _, m := range journal {
		snap = snap.with(m)
	}
	c.snap.Store(snap)

	pages := max(1, (len(raw)+pageSize-1)/pageSize)
	floor := time.Duration(pages) * time.Hour / time.Duration(c.budget)
	return fetched{floor: floor, fields: []zap.Field{
		zap.Int("servers", snap.Len()),
		zap.Int("pages", pages),
		zap.Int("requests", requests),
		zap.Int("ignored", ignored),
		zap.Int("reapplied", len(journal)),
		zap.Duration("budget_floor", floor),
	}}, nil
}

// convert keeps the servers the selector promised: with a pool label and
// our cluster label, or no cluster label when the cluster has no name. Records share one copy of each repeated
// string (pool, type, location, status) instead of one per server.
func (c *Cache) convert(raw []*hcloud.Server) ([]*Server, int) {
	records := make([]Server, 0, len(raw))
	intern := make(map[string]string)
	in := func(s string) string {
		if v, ok := intern[s]; ok {
			return v
		}
		intern[s] = s
		return s
	}
	ignored := 0
	for _, s := range raw {
		if s == nil || s.Labels[config.LabelNodeGroup] == "" ||
			!config.InCluster(s.Labels, c.cluster) {
			ignored++
			continue
		}
		r := FromHCloud(s)
		r.Pool = in(r.Pool)
		r.ServerType = in(r.ServerType)
		r.Location = in(r.Location)
		r.Status = hcloud.ServerStatus(in(string(r.Status)))
		records = append(records, r)
	}
	servers := make([]*Server, len(records))
	for i := range records {
		servers[i] = &records[i]
	}
	return servers, ignored
}
