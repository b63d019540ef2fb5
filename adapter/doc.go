// Package adapter plugs hcloudscale into a build of the Kubernetes Cluster
// Autoscaler as an in-process cloud provider: [Provider] implements the
// autoscaler's [cloudprovider.CloudProvider] and [NodeGroup] its
// [cloudprovider.NodeGroup], one node group per pool, over an
// [hcloudscale.Cluster].
//
// The package is a Go module of its own
// (github.com/hcloudscale/hcloudscale/adapter), so that the library never
// pulls the autoscaler's dependency tree into other builds. It is built
// and tested against sigs.k8s.io/cluster-autoscaler at commit 33c3f97bf2
// (2026-08-21). README.md in this directory says how to add it to a fork
// of kubernetes/autoscaler.
//
// # Registration
//
// One line in an init function of the autoscaler build:
//
//	adapter.Register("hcloudscale") // --cloud-provider=hcloudscale
//
// Registered as "hetzner" it replaces the built-in Hetzner provider,
// which must then not be linked (its registration under the same name
// would end the process). The provider reads what the built-in one reads:
// the HCLOUD_* environment variables and one --nodes flag per pool (see
// package config); --cloud-config is not read, and
// --node-group-auto-discovery is an error.
//
// The autoscaler's builder cannot return an error. [New] is the
// constructor that does, with every problem joined; only the builder that
// Register installs ends the process (status 1) after logging each
// problem on a line of its own.
//
// # Calls and contexts
//
// The autoscaler's interfaces carry no context. The Provider keeps one
// root context, the only stored context in hcloudscale; each call that
// may reach the API derives its own from it, bounded by the call timeout
// ([DefaultCallTimeout], [WithCallTimeout]), and [Provider.Cleanup]
// cancels it, waits for background work and closes the Cluster.
//
// Sizes, instances, NodeGroupForNode, GetOptions and node prices are
// answered from memory. IncreaseSize records claims and returns; the
// servers are created in the background, and a failed create shows in
// Nodes as an instance in state creating with error info
// (OutOfResourcesErrorClass for sold-out server types, full placement
// groups and the like), which makes the autoscaler back the group off and
// try another. DeleteNodes returns once the API accepted the deletes.
// AtomicIncreaseSize returns once the claims are recorded and rolls the
// whole scale-up back in the background if any server fails.
// Refresh lists the servers when the listing's TTL has passed and answers
// from the previous listing when a new one takes longer than the call
// timeout.
//
// NewNodeGroup, Create and Delete return [cloudprovider.ErrNotImplemented]
// itself, never wrapped (the autoscaler compares it by identity), and
// change nothing: pools are configured, not auto-provisioned.
//
// # Nodes that are not ours
//
// NodeGroupForNode returns nil (and no error) for control-plane servers,
// servers of other clusters, Robot servers (hrobot://, hcloud://bm-) and
// other providers' nodes. HasInstance answers true with
// cloudprovider.ErrNotImplemented for a node whose provider ID names no
// Hetzner Cloud server: the autoscaler then treats such a node as gone
// only if it carries the autoscaler's ToBeDeleted taint, as for providers
// without HasInstance, so a Robot or foreign node is never taken for a
// deleted server.
//
// # Errors
//
// Errors are the autoscaler's AutoscalerError: TransientError for a
// sold-out offering ([pool.ErrOfferingUnavailable]) and for a call that
// ran out of time, InternalError once the provider is shutting down,
// CloudProviderError otherwise. errors.Is and errors.As see through them.
//
// # Pricing
//
// With --expander=price the autoscaler ranks scale-up options by node
// price over the price of the pending pods. NodePrice is the hourly net
// price of the pool's server type in its location times the hours
// (template nodes are found by their hcloud/node-group label or the group
// in their name, also the autoscaler's copies of a real node whose server
// is gone). PodPrice
// must not depend on the option, so pods are priced at one rate for the
// cluster: half of a pool's hourly price pays for its cores and half for
// its memory, the cheapest pool per core and per GiB sets the rate, and a
// pod's CPU and memory requests (counted as the scheduler counts them)
// are priced at it.
//
// # Node labeller
//
// [WithNodeLabeller] runs the node labeller of package
// github.com/hcloudscale/hcloudscale/nodelabel until Cleanup: once a node
// of a pool registers, it adds the pool's labels and taints that the node
// lacks, including labels that the NodeRestriction admission plugin
// forbids the kubelet to set. Register enables it with the autoscaler's
// Kubernetes client when [EnvLabelNodes] (HCLOUD_LABEL_NODES) is true; the
// autoscaler's ClusterRole then needs update on nodes. Without it, the
// provider logs a warning for each pool whose labels or taints its nodes
// will not get (config.NodeLabelWarnings).
//
// # Logs and metrics
//
// [NewKlogLogger] bridges hcloudscale's zap logs to klog, so they appear
// in the autoscaler's log and obey its --v flag: debug (API traffic with
// secrets redacted, listings) at V(5), info (scale-ups, servers running,
// deletes) at V(0), warnings and errors as such, each with its fields and
// the file:line that logged. Register uses it, and registers the
// hcloudscale_* and hcloud_api_* metrics with the autoscaler's registry,
// served on its --address endpoint. A build that also links the built-in
// Hetzner provider has hcloud_api_* registered already: those series are
// then not exported twice, and a warning says so.
//
// The adapter must not import package
// github.com/hcloudscale/hcloudscale/externalgrpc: its generated protos
// use the autoscaler's message names, and a binary that also links the
// autoscaler's externalgrpc provider would panic at start-up.
package adapter
