// Package hcloudscale autoscales Kubernetes worker-node pools on Hetzner
// Cloud.
//
// It is a library first, and a drop-in replacement for the Cluster
// Autoscaler's built-in Hetzner provider: the same environment variables,
// --nodes specs, cluster-config JSON, server labels and provider IDs.
// Package [github.com/hcloudscale/hcloudscale/config] reads and validates
// those settings; [github.com/hcloudscale/hcloudscale/imageresolve] picks
// the image per architecture; [github.com/hcloudscale/hcloudscale/servercache]
// keeps one label-selected listing of the cluster's servers;
// [github.com/hcloudscale/hcloudscale/pool] scales one node pool. This
// package wires them into a [Cluster]:
//
//	cfg, err := config.LoadFromOS([]string{"0:10:cpx31:fsn1:workers"})
//	if err != nil {
//		return err // every problem at once, each naming its setting
//	}
//	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(logger))
//	if err != nil {
//		return err // missing firewalls, sold-out types, images, ...
//	}
//	defer c.Close(ctx)
//	err = c.Pool("workers").IncreaseSize(ctx, 3) // returns at once
//
// The Cluster Autoscaler reaches a Cluster through package
// [github.com/hcloudscale/hcloudscale/externalgrpc] (the hcloudscale serve
// command, for a stock autoscaler image) or through the adapter module
// github.com/hcloudscale/hcloudscale/adapter (in-process, in a fork).
//
// # What New checks
//
// Before the first scale-up, [New] looks up every reference once: the
// network and that each subnet range is one of its subnets, each firewall,
// SSH key and placement group, that each pool's server type exists and is
// offered in the pool's location, and that an image exists for the type's
// architecture. Everything wrong is reported together. [WithLenientChecks]
// turns the server-type and image checks into warnings
// ([Cluster.Warnings]), for tools that inspect or clean up a cluster whose
// offer has changed.
//
// A shortage is not a configuration error and never stops New: a server
// type that is sold out in its location (the catalogue marks it
// unavailable) gives a warning naming the pool, and the pool starts with
// its offering marked unavailable, exactly as after a capacity error at
// runtime: IncreaseSize fails at once with [pool.ErrOfferingUnavailable],
// the hcloudscale_unavailable_offerings metric and [pool.Status] show it,
// and once the mark expires the next scale-up reads the catalogue again.
// A placement group with less room than the summed max sizes of its pools
// (other servers sit in it) is likewise a warning; a full group is a
// capacity error at runtime. The other pools scale as usual.
//
// # Requests and the API budget
//
// All pools share one hcloud-go client ([Cluster.Client]). Requests pass
// through a pacer that reads the RateLimit-* headers and keeps a reserve of
// the project's hourly budget for the other tools that share it (5% by
// default, 180 of 3,600; [WithRateLimitReserve]; [Cluster.RateLimit] reports
// the estimate), and through a debug log (zap debug level) that redacts the
// token, user data and passwords. Log fields have snake_case keys
// (server_id, correlation_id, body_bytes), as hcloud-go's and zap's do.
//
// Servers are listed for all pools together, with one label-selected
// listing per TTL ([WithListTTL], [DefaultListTTL]); [Cluster.Refresh] lists
// only when the TTL has passed. Large clusters are listed less often, so
// that listings cost at most 180 requests an hour: 10,000 servers (200
// pages) are listed at most once an hour. Our own creates and deletes reach
// the listing at once. In-flight actions of all pools are polled together,
// 50 per request, when they can have finished by the durations the waiter
// learned, and no more often than every [DefaultPollInterval]
// ([WithPollInterval]); the actionwait package documentation explains the
// schedule.
//
// # Nodes
//
// [Cluster.PoolForNode] maps a Kubernetes node to its pool by provider ID
// ("hcloud://<server id>") or node name, from memory in constant time;
// every instance a pool reports maps back, also a claim ID and a server
// still being created that no listing has shown yet (those by asking the
// pools, see [pool.Pool.CreatesNode]). Nodes that are not servers of a
// pool (control planes, other clusters, Robot servers) map to nil.
// [Cluster.PoolForTemplateNode] maps the autoscaler's template nodes, by
// their pool label or the group in their name: a template copied from a
// real node keeps that node's provider ID long after its server is gone.
// [Cluster.HasServer] tells whether the server
// behind a provider ID still exists, and returns [ErrNotHCloud] for
// provider IDs of other schemes.
//
// # Metrics
//
// [WithRegisterer] registers the pools' metrics (hcloudscale_pool_*,
// hcloudscale_server_*, hcloudscale_unavailable_offerings), the action
// waiter's (hcloudscale_action_*), the rate-limit
// budget (hcloudscale_api_*) and hcloud-go's request metrics (hcloud_api_*).
// docs/deploy.md in the repository lists every series.
//
// # Changing the configuration
//
// [Cluster.Reconfigure] applies a new configuration, checked whole as New
// checks it, all or nothing: pools are added, changed (new bounds and
// settings apply to the next scale-up; claims in flight finish as they
// began) and removed (a removed pool keeps its servers, min and max 0, no
// scale-up, until the autoscaler has scaled it down; then [Cluster.Refresh]
// drops it). [WithReload] (or [WithConfigFileReload]) makes Refresh read
// the configuration file again when its content changed and apply it; a
// file that does not load or is refused changes nothing
// ([Cluster.ReloadStatus], hcloudscale_config_*). [Cluster.Generation]
// tells callers that keep something per pool when to look again.
//
// [Cluster.Drift] reports the servers that differ from their pool's
// current configuration (server type, location, image, placement group,
// network, firewalls, labels, user data by the hash recorded at create),
// counted in hcloudscale_pool_drifted_servers. Nothing replaces them.
//
// # One writer
//
// Run one Cluster per Kubernetes cluster at a time (the autoscaler's leader
// election, or one replica of hcloudscale serve): claims that have no server
// yet live in memory. Everything else is rebuilt from the API after a
// restart, from the servers' hcloud/node-group labels.
package hcloudscale
