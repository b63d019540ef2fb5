// Package servercache keeps an indexed, in-memory view of a cluster's
// Hetzner Cloud servers and of the server-type catalogue, refreshed by as
// few API requests as the answers allow.
//
// # One listing per refresh
//
// A [Cache] lists with one label-selected GET /servers, paged by 50:
// config.LabelNodeGroup, plus config.LabelCluster=<name> when
// [WithClusterName] scopes it, or !config.LabelCluster when the cluster has
// no name (servers labelled for a named cluster are not an unnamed
// cluster's), so servers of other clusters and other tools in the same
// project are never fetched. Servers that lack the pool label, or carry
// another cluster's label, are dropped even if an API answers with them
// ([config.InCluster]).
//
// Pages are numbered and sorted by ID (sort=id:asc), so a new server goes
// to the end, but a server deleted during the listing from a page already
// read moves every later server up one place, and one would slide unseen
// onto that page. The listing watches meta.pagination.total_entries: when
// it changes between two pages, the listing steps back until a page
// reaches what it had read completely and pages forward again (usually
// two more requests), so no server that exists throughout a listing is
// missed. Only a deletion and a creation between the same two page
// requests, which leave the total unchanged, can hide a server until the
// next listing.
//
// The listing is indexed once by server ID, by name and by pool into an
// immutable [Snapshot]. Lookups are map reads with no allocation:
// [Snapshot.ByNode] maps a Kubernetes node to its server by provider ID
// (see [ParseProviderID]) or, when the provider ID is empty, by node name.
//
// # Freshness and cost
//
// A snapshot is fresh for a TTL ([DefaultTTL], 60 s) times a random factor
// in [1-jitter, 1+jitter) ([DefaultJitter], 0.1), so that processes do not
// list in lockstep. A listing of many pages stays fresh longer, so that
// listings cost at most a budget of requests per hour
// ([DefaultListingBudget], 180, 5% of Hetzner's default 3,600): a listing
// of P pages stays fresh for at least P × 3600 s / budget even at the low
// end of the jitter. Up to 100 servers
// (2 pages) the TTL decides; 10,000 servers (200 pages) are listed every
// 66.7 minutes at the soonest and about every 74 minutes on average, so no
// hour of the clock holds two listings (200 requests). Our own changes do
// not wait for a listing: [Cache.Upsert] and [Cache.Remove] apply creates,
// status changes and completed deletes to the snapshot at once,
// copy-on-write.
//
// Concurrent [Cache.Get] calls after an expiry share one listing
// (singleflight). A caller whose context ends stops waiting at once; the
// listing continues for the others, bounded by [WithListTimeout]. After a
// failed listing, Get returns the failure for a short backoff instead of
// listing again on every call.
//
// # Stale but good
//
// Both caches follow one rule for reading through API trouble: stale but
// good beats fresh but failing. A failed fetch never throws away a value
// that was good; it is retried after a backoff of 5 s, then 10 s (or the
// TTL if shorter), so the first retry after the API answers again comes
// within one autoscaler loop.
//
//   - The server-type catalogue, which changes a few times a year, is
//     served stale: after its TTL, [TypeCatalog.Lookup] and
//     [TypeCatalog.All] wait at most a second for a new catalogue and
//     otherwise answer from the one in memory, for up to
//     [WithMaxStale] ([DefaultTypeMaxStale], 24 hours) after it was
//     fetched. Templates, prices and create requests thus keep working
//     through an outage. With no catalogue yet, or an older one, the
//     fetch's error is returned.
//   - The server listing's last snapshot stays in [Cache.Current], which
//     node lookups, instance lists and target sizes read, however long
//     the outage lasts. [Cache.Get] and [Cache.Refresh] do return the
//     failure: a caller that decides on what may have changed (the
//     autoscaler's Refresh, which then skips its loop instead of scaling
//     on a view it cannot renew) learns that the view is old.
//
// [Cache.StaleSince] and [TypeCatalog.StaleSince] tell since when a
// value has been kept past its expiry; the hcloudscale package exports
// them as a metric.
//
// # Our own changes during a listing
//
// A listing takes time, and a create or delete of ours can complete while
// it runs: the listing may then miss the new server, or still show the
// deleted one. Every Upsert and Remove made while a listing is in flight
// is kept in a journal and re-applied on top of that listing's result, so
// a listing that started before our change can neither lose nor resurrect
// a server.
//
// # Server types
//
// A [TypeCatalog] caches GET /server_types the same way, with its own TTL
// ([DefaultTypeTTL]): cores, memory, disk, architecture, and per location
// availability, deprecation and prices ([TypeLocation]).
//
// # Example
//
//	client := hcloud.NewClient(hcloud.WithToken(token))
//	servers := servercache.New(&client.Server,
//		servercache.WithClusterName("prod"),
//		servercache.WithLogger(logger))
//	defer servers.Close()
//
//	snap, err := servers.Get(ctx)
//	if err != nil {
//		return err
//	}
//	if srv := snap.ByNode(node.Spec.ProviderID, node.Name); srv != nil {
//		fmt.Println(node.Name, "is in pool", srv.Pool)
//	}
package servercache
