// Package externalgrpc serves the Kubernetes Cluster Autoscaler's
// externalgrpc cloud-provider protocol over an hcloudscale Cluster, so that
// a stock autoscaler image started with --cloud-provider=externalgrpc can
// scale Hetzner Cloud node pools without a fork.
//
// # Wire contract
//
// The messages and the CloudProvider service are generated into
// [github.com/hcloudscale/hcloudscale/externalgrpc/protos] from hcloudscale's
// own .proto. It keeps the autoscaler's proto package, service, RPC and
// message names and field numbers, so the autoscaler's client calls it
// unchanged, and it also declares the fields that upstream removed in
// November 2025 with wire-identical types, so Cluster Autoscaler 1.34 and
// older can be served too. Its registered file path and Go import path are
// its own, but its message names are the autoscaler's: a binary must not
// link the autoscaler's generated protos package as well, or protobuf-go
// panics at start-up.
//
// # Server
//
// [NewServer] answers every RPC of the service over an
// [hcloudscale.Cluster]; register it with
// [protos.RegisterCloudProviderServer] on a grpc.Server built with
// [Server.ServerOptions], which installs [Server.UnaryInterceptor] for
// logs and metrics (hcloudscale_externalgrpc_requests_total by method and
// status code, hcloudscale_externalgrpc_request_duration_seconds by
// method, on the registerer of [WithRegisterer]), the package's codec and
// [DefaultLimits]; serve it on a listener wrapped by
// [Limits.Listener], and use [ServerTLSConfig] for the mutual TLS the
// autoscaler's client speaks. The hcloudscale serve command does all of
// that.
//
// Every answer comes from memory, or from work bounded by the call timeout
// ([WithCallTimeout], [DefaultCallTimeout] 4 s: the autoscaler gives each
// call 5 s):
//
//   - NodeGroupIncreaseSize records claims and returns; the servers are
//     created in the background, and a failed create shows in
//     NodeGroupNodes as an instance in state creating with error info:
//     class 1 (OutOfResources) for capacity errors, 99 otherwise. The
//     autoscaler then backs the group off, tries another one and deletes
//     the instance.
//   - NodeGroupDeleteNodes returns once the API accepted the delete
//     requests; the delete actions are awaited in the background.
//   - NodeGroups, NodeGroupForNode, NodeGroupTargetSize, NodeGroupNodes
//     and NodeGroupDecreaseTargetSize make no API call. Refresh lists the
//     servers only when the listing's TTL has passed, and answers with the
//     previous listing when a new one takes longer than the call timeout.
//   - NodeGroupTemplateNodeInfo puts the same (*v1.Node).Marshal() bytes
//     into nodeBytes and into the legacy nodeInfo field, so that Cluster
//     Autoscaler 1.34.1 and older decode it too.
//   - Cleanup does nothing: the server outlives the autoscaler's restarts,
//     and its owner closes the Cluster.
//
// # API outages
//
// Read answers follow one rule: stale but good beats fresh but failing.
// While the Hetzner API is down, NodeGroupTemplateNodeInfo and the
// Pricing calls answer from the server-type catalogue in memory, used up
// to a day past its fetch (it is refreshed hourly, and within 10 s of
// the API answering again), and waiting at most a second for a new one;
// NodeGroupNodes, NodeGroupTargetSize and NodeGroupForNode answer from the
// last listing however old. Refresh does return Unavailable once the
// listing has expired and cannot be renewed, so the autoscaler skips its
// loop instead of scaling on a view it cannot renew; the listing is tried
// again after a backoff of at most 10 s, one autoscaler loop. A scale-up accepted during
// an outage is recorded, and its create fails after its retries and shows
// as a failed instance of class Other. Nothing is deleted because of an
// outage. hcloudscale_stale_since_seconds tells since when each read path
// has been stale.
//
// # Status codes
//
// NotFound: an unknown node group id. InvalidArgument: a size increase
// that is not positive or passes the max size, a decrease that is not
// negative, nodes that are not instances of the group, missing or
// malformed request fields. FailedPrecondition: a delete that would take
// the group below its min size. ResourceExhausted: a scale-up of a group
// whose server type is remembered as sold out in its location
// ([pool.ErrOfferingUnavailable]); it fails at once so that the
// autoscaler moves on to another group. Unavailable: a failed server
// listing in Refresh, a server that is shutting down, or a replica that
// may not change servers (Refresh and the three calls that change a
// group, behind a [Gate] that refuses: see [WithGate]).
// DeadlineExceeded or Canceled: work that ran out of the call timeout or
// whose call was cancelled. Internal: anything else. Unimplemented is answered only by NodeGroupGetOptions,
// see below. Messages name the group and the value at fault and never
// contain the token or user data.
//
// # Autoscaling options and MaxNodeStartupTime
//
// NodeGroupGetOptions answers only for pools whose cluster-config entry
// sets autoscaling; for the others it is Unimplemented and the autoscaler
// uses its flags. The answer is the autoscaler's defaults with the pool's
// settings laid over them, all three durations in the current and in the
// legacy encoding. The protocol has no field for maxNodeStartupTime and
// allowNonAtomicScaleUpToMax, and Cluster Autoscaler 1.35 and later use a
// MaxNodeStartupTime of 0 for every group whose options are answered
// (kubernetes/autoscaler#10245): a node that registered but is not Ready
// yet counts as unready at once, which can push the autoscaler over
// --ok-total-unready-count and make it skip loops while nodes boot. Set
// autoscaling options for a pool only when they are worth that; NewServer
// logs a warning for each such pool.
//
// For a pool without options there were three possible answers: echo the
// defaults back (the autoscaler would then take the pool as one with
// options and use a MaxNodeStartupTime of 0 for it), an OK answer without
// options, or Unimplemented. Every caller in the autoscaler's core treats
// the last two alike (it keeps its defaults; the client has read an empty
// answer as "no options" since its first version). Unimplemented is the
// cheaper one to serve: gRPC sends it as a single trailers-only frame, and
// the error is built once per pool, so no message is encoded.
//
// # Cost of the autoscaler's hot calls
//
// The autoscaler's externalgrpc client calls NodeGroupForNode once per node
// on every loop (it drops that cache on each Refresh) and
// NodeGroupGetOptions twice per node; at 5,000 nodes about 15,000 calls
// reach the server every scan interval. Each is answered from memory, so
// what costs is the call itself, most of it grpc-go's transport, TLS and
// the kernel. [Server.ServerOptions] plugs a codec into grpc-go
// (grpc.ForceServerCodecV2) that decodes of a NodeGroupForNode request
// only the provider ID, the name and the two labels the server reads (not
// the node's other labels and annotations), and of a NodeGroupGetOptions
// request for a pool without options only the id (the autoscaler's
// defaults are checked, not decoded); answers are encoded by grpc-go's
// proto codec. BenchmarkHotCalls measures it against grpc-go's proto
// codec (BENCHMARKS.md). Metrics are looked up once per method and status
// code, and debug fields are built only when debug logging is on. A
// cluster of thousands of nodes is better served by the in-process
// adapter, which makes none of these calls.
//
// # Limits
//
// [DefaultLimits] are grpc-go's own settings, chosen from what the
// autoscaler's client does: it dials one connection (grpc.Dial with
// default options: no keepalive pings of its own, grpc-go's default
// message sizes), keeps it for its lifetime and makes its calls one at a
// time from its loop, each with a 5 s deadline (grpc_timeout). Only the
// scale-down's node deletions, one goroutine per node group, and a
// parallel scale-up run calls side by side. What a client can make the
// process hold is then bounded by the product of the limits, whatever it
// sends or fails to read:
//
//   - MaxConns 8: the autoscaler holds one connection, two while it is
//     being replaced; the rest is room for an operator's grpcurl and
//     probes. Connections beyond it wait in the kernel's backlog. The cap
//     bounds memory, it does not keep a client that can connect from
//     taking the slots (mutual TLS and a NetworkPolicy do): a connection
//     without a client certificate ends with its handshake, one that
//     stalls the handshake at the handshake timeout.
//   - MaxStreams 16 calls per connection: the autoscaler's calls run one
//     at a time, the deletions of a scale-down (at most
//     --max-scale-down-parallelism, 10 by default, in as many node groups)
//     beside them. grpc-go starts no handler beyond it and reads no more
//     from a connection at it, which also ends rapid-reset floods.
//   - MaxRecvMsgSize 1 MiB: the largest requests are NodeGroupDeleteNodes
//     (a few nodes' labels and annotations; the API server caps a node's
//     annotations at 256 KiB, real nodes carry a few KiB) and
//     PricingPodPrice (one pod, of a few KiB to a few tens). A larger
//     request fails with ResourceExhausted; grpc-go's default is 4 MiB.
//     grpc-go collects a message as it arrives, so a connection holding
//     request bodies open holds at most MaxStreams × 1 MiB.
//   - MaxHeaderListSize 16 KiB: the client's headers are under 1 KiB (the
//     path, content type, user agent, deadline). A larger header block,
//     however split into CONTINUATION frames, ends the connection
//     (grpc-go's default is 16 MiB).
//   - Window 64 KiB per stream and per connection, and read and write
//     buffers of 32 KiB: requests are small; a fixed window turns off
//     grpc-go's window growth (up to 16 MiB) for clients that send ahead.
//     An answer that a client does not read waits in the server for at
//     most grpc-go's per-stream write quota (64 KiB) beyond the message,
//     and the handler waits with it, within MaxStreams.
//   - HandshakeTimeout 10 s: the TLS handshake and the HTTP/2 preface
//     take milliseconds in the pod network; a connection that opens and
//     sends nothing is closed after it (grpc-go's default is 120 s).
//   - MaxIdle 2 min: the autoscaler calls at least every scan interval
//     (10 s by default), so only abandoned connections idle that long; a
//     longer --scan-interval costs a new handshake per loop, nothing else.
//   - MaxAge 30 min, then a grace of 10 s (twice the client's deadline)
//     for the calls in progress: the client reconnects at once, which also
//     picks up a renewed certificate; a connection holding stuck calls
//     ends after it.
//   - PingAfter 1 min, PingTimeout 20 s: the server pings a connection
//     the client has sent nothing on for a minute and closes it if the
//     answer does not come; a client that stopped reading is closed so.
//   - MinPingInterval 1 min: the client sends no keepalive pings; the
//     pings grpc-go's client sends to measure bandwidth follow the
//     server's answers, which grpc-go does not count. More than two pings
//     faster than that, or any without a call in progress, end the
//     connection with GOAWAY ENHANCE_YOUR_CALM.
//
// grpc-go also holds back reading a connection while more than 50
// acknowledgements (SETTINGS, PING) wait to be written, which bounds
// SETTINGS and PING floods from clients that do not read. The serve
// command's TestServeHostileClients runs held request bodies, a client
// that never reads, a zero window, rapid reset, PING, SETTINGS and
// CONTINUATION floods, idle and half-open connections and oversized
// messages against the real process, in plaintext and over mutual TLS,
// and checks its resident memory and a well-behaved client beside the
// attacker.
//
// # Pricing
//
// PricingNodePrice is the hourly net price of the pool's server type in
// its location times the hours ([pool.Pool.Price]); template nodes are
// found by their hcloud/node-group label or the group in their name, also
// the autoscaler's copies of a real node whose server is gone
// ([hcloudscale.Cluster.PoolForTemplateNode]). PricingPodPrice prices a pod's
// CPU and memory requests at one cluster-wide rate (see [PodPrice] and
// [Server.PricingPodPrice]), so that the price expander compares groups
// on the node price alone. Both accept the current and the legacy request
// fields.
package externalgrpc
