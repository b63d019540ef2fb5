// Package pool is the scaling engine for one node pool on Hetzner Cloud:
// claims, server creation, deletion, instance states, the scale-from-zero
// template, price and per-pool autoscaler options.
//
// A [Pool] is built with [New] from the resolved pool configuration
// (config.Pool) and [Deps]: the hcloud-go server client behind the
// consumer interface [ServerAPI], the process-wide [actionwait.Waiter], the shared
// servercache.Cache and servercache.TypeCatalog, the imageresolve.Resolver,
// and the network, firewalls, SSH keys and placement group that the caller
// resolved once (the pool never looks references up). New does no I/O.
//
// # Target size and claims
//
// TargetSize is the number of the pool's servers that exist and are not
// being deleted, plus the pending claims, plus the placeholders of failed
// claims. It is answered from memory (the cache's current snapshot and the
// pool's claims) and is consistent after every call, under concurrency:
// every change happens under the pool's own mutex, which no other pool
// shares and which is never held during I/O.
//
// Every reader and every check (TargetSize, the max check of
// IncreaseSize, Instances, Status, the membership and min checks of
// DeleteInstances, DecreaseTargetSize) reads the cache's snapshot under
// that mutex, together with the claims: one view of one instant. A create
// flow publishes its server in the cache before it drops the claim under
// the mutex, and a delete forgets a server in the cache before it drops
// its deleting mark, so in every view a server is counted exactly once,
// through its claim or as a listed server. (A snapshot read before taking
// the mutex could predate a server whose claim is gone once the mutex is
// held: the server would count zero times, the target would dip and a
// concurrent IncreaseSize could pass the max.)
//
// [Pool.IncreaseSize] checks n > 0 and target+n <= max under that mutex,
// records n claims and returns at once, without an API call. Each claim
// picks its server name once ("<pool>-<16 hex digits>") and keeps it for
// every retry, so a retried create can never make a second server. The
// claims' create flows run in the background; the pool bounds their
// create-side requests (create, attach, power on) to
// [WithCreateConcurrency] (default 10) at a time, and their action waits are shared by
// the [actionwait.Waiter].
//
// [Pool.Surge] records one claim the same way for a node lifecycle that
// replaces nodes surge-first; its server carries config.LabelReplaces with
// the ID of the server it replaces. Its bound is target + deletes in flight
// + 1 <= max + maxSurge: a surge claim takes the target above max by at
// most maxSurge. The autoscaler then sees TargetSize > MaxSize and does
// not scale the pool up, and IncreaseSize refuses ([ErrAboveMax]) until
// the old server's delete has brought the pool back to its max.
//
// # The create flow
//
//  1. Server type from the catalogue; it must be available in the location
//     (a price alone does not make it orderable). The image for the type's
//     architecture from the resolver (cached).
//  2. POST /servers with name, type, image, location, user data, the pool's
//     server labels (hcloud/node-group and, with a cluster name,
//     hcloudscale/cluster), SSH keys, public IPv4/IPv6, firewalls,
//     placement group and, without a subnet range, the network.
//     start_after_create is true unless a subnet range is set.
//  3. Wait for create_server and the next actions.
//  4. With a subnet range: attach to the network with that range, wait,
//     power on, wait. (Creating stopped is the only way to choose the
//     subnet; without one, the server starts with its create.)
//  5. On success the server goes into the cache as running at once and
//     the claim is dropped: the server counts instead, without a gap or a
//     double count.
//
// A transient failure of the create request (a dropped connection, 5xx,
// timeout, server_error) is sent again with the same name, a bounded
// number of times (3 attempts), after a backoff that starts at 1 s
// and doubles, on the pool's clock ([WithClock]); the pool's other
// repeated requests (attach, power on, deletes) back off the same way. The request and its retries (also hcloud-go's own) end
// with the claim, except for an attempt on the wire (written, not yet
// answered), whose outcome is awaited: a claim removed by DeleteInstances
// sends no further attempt, and the server an earlier attempt may have
// made is looked up by name and deleted. If the earlier attempt created the server and only its
// response was lost, the retry gets uniqueness_error; the flow then looks
// the server up by name and adopts it if it carries the pool's labels (and
// fails with "name-taken" otherwise). The same look-up follows a create
// request that failed on the way after its last attempt (or ran into the
// creation timeout), so a server the API made anyway is found and cleaned
// up. An adopted server's actions are unknown, so the flow polls its status
// (one waiter interval after the first look, then at pauses doubling up to
// ten intervals) until it runs, and only then counts it as running.
//
// A create refused with invalid_input or not_found may name an image that
// is gone (a snapshot deleted after a newer one was published, within the
// resolver's cache TTL): the flow drops the cached resolution
// (imageresolve's Forget), resolves the image again and, when that names
// another image, sends the create once more with it and the same name.
// The claim fails only if that fails too.
//
// # Stale but good
//
// Reads that a create, a template or a price needs follow one rule:
// stale but good beats fresh but failing. When the API is down, the
// server-type catalogue and resolved images are used past their TTLs
// (for up to a day; see servercache and imageresolve), so TemplateNode
// and Price keep answering and a create is not refused for want of a
// catalogue or an image; Nodes, Instances and TargetSize answer from the
// last listing, as always. A create request itself cannot be answered
// from memory: during an outage it fails after its retries and becomes a
// placeholder of class Other, which the autoscaler deletes and backs the
// pool off from. Nothing is deleted because of an outage: a server that
// cannot be looked up keeps its last known state.
//
// A failure after the server exists never deletes a server that ran:
// the flow looks the server up first (see "Create flows never delete
// what ran"). A server that provably never ran is deleted and the delete
// awaited, retrying a bounded number of times (logged at error if all
// fail: the server keeps its labels, so the next listing shows it). The
// whole flow is bounded by the creation timeout ([WithCreationTimeout],
// HCLOUD_SERVER_CREATION_TIMEOUT). [Pool.Close] that gives up waiting
// leaves a server alone rather than half-deleting it; the next Pool
// resumes its flow (see Restart safety).
//
// # Failures and fail-over
//
// A failed claim stays in [Pool.Instances] as a placeholder: State
// Creating with [ErrorInfo] (class, code, message; never user data or
// tokens) and its claim ID, until DeleteInstances removes it. It counts in
// TargetSize. This is the Cluster Autoscaler's contract for asynchronous
// creates: it recognises a failed scale-up only from a Creating instance
// with error info, shrinks its pending scale-up by it, backs the group off,
// deletes the instance, and tries another group.
//
// The error class is [OutOfResources] for resource_unavailable,
// resource_limit_exceeded, placement_error,
// placement_group_member_limit_reached, unavailable, a full placement
// group reported as service_error, and a server type the catalogue marks
// unavailable in the location; [Other] for everything else. Codes are the
// Hetzner code or one of a small fixed set (CodeTimeout, CodeActionFailed,
// ...), because the autoscaler turns them into metric labels.
//
// After a capacity error the pool remembers the offering (server type in
// location, or the placement group) as unavailable for
// [DefaultUnavailableTTL] (5 minutes): IncreaseSize then fails at once with
// an error matching [ErrOfferingUnavailable], records no claim and makes
// no API call. The autoscaler backs a group off as soon as IncreaseSize
// returns an error, so this is the fastest fail-over to another pool.
// Pools can share the memory with [WithOfferings]. A Cluster marks an
// offering the catalogue shows as sold out when it starts
// ([Offerings.MarkUnavailable]), so its pool starts and fails fast. When a
// mark from the catalogue expires, the next IncreaseSize makes the
// catalogue be fetched again before its creates read it (one request per
// expiry), so a type Hetzner offers again is used at once rather than
// after the catalogue's TTL.
//
// [Pool.AtomicIncreaseSize] waits for all n servers; on any failure it
// deletes the ones created, waits for those deletes, and returns an error;
// no placeholder remains.
//
// # Instance IDs and states
//
// A server's instance ID is its provider ID, "hcloud://<id>" (what the
// Hetzner cloud controller manager writes into spec.providerID). A claim
// whose server does not exist yet, and a placeholder, have a stable claim
// ID "hcloudscale://<pool>/<server name>" ([ClaimID], [ParseClaimID]): the
// autoscaler keys an unregistered instance's age by its ID and gives its
// fake nodes that ID as name and provider ID, so a Cluster routes them
// back here.
//
// Servers map to states as follows ([State] and [ErrorClass] have the
// autoscaler's numeric values):
//
//	owned by a create flow of this process    Creating (also while off
//	                                          before power-on)
//	kept by a failed create flow: it runs,    by its status, below
//	ran or may have run                       (Running), never deleted
//	                                          by the flow
//	left by a failed create flow that         deleted by the flow; its
//	provably never ran                        claim is a placeholder:
//	                                          Creating, error
//	deleted by us, or status deleting         Deleting
//	initializing                              Creating; after the creation
//	                                          timeout: error Other
//	                                          "not-started"
//	starting, running, off, stopping,         Running
//	migrating, rebuilding
//	unknown, anything else                    Running
//
// # Server lifecycle
//
// The autoscaler deletes every Creating instance with an error on its next
// loop, without drain and below min size, so "not-started" is reported
// only for a server that has certainly never run. Hetzner's statuses
// follow each other like this:
//
//	(create)      initializing -> off            created stopped
//	              initializing -> starting -> running
//	power on      off -> starting -> running
//	reset         running -> starting -> running
//	shutdown      running -> stopping -> off
//	power off     running -> off
//	rebuild       running|off -> rebuilding -> running|off
//	migration     running|off -> migrating -> running|off
//	any time      -> unknown -> the status before
//	delete        any -> deleting -> (gone)
//
// initializing happens only during a server's first creation: no status
// leads back to it. Every other status can follow a boot, for a node of
// any age: a person or Hetzner maintenance power-cycles, resets, shuts
// down, rebuilds or migrates it, and a listing may catch it in any of the
// statuses on the way. So a listed server is a failed creation only when
// it is still initializing longer than the creation timeout after its
// creation began. Anything else that is not running is reported Running:
// its node goes NotReady, and the autoscaler's unready-node handling
// (which drains, and keeps min size) applies rather than failed-creation
// cleanup. DeleteInstances holds min size for it too.
//
// A server that a pool with a subnet range created stopped is off until
// it is attached and powered on. While a create flow of this process owns
// it, it is Creating; from a listing alone it cannot be told from a node
// someone shut down, so it is never reported as a failed creation. A
// restarted process recognises the flows the previous one left unfinished
// and finishes them (see Restart safety).
//
// Only failed creations carry error info; "unknown" is plain Running, for
// the reason given under Deleting and shrinking.
//
// # Create flows never delete what ran
//
// A create flow follows the rule above: a server that ran is not a
// failed creation, and the flow does not delete it. A flow that fails
// (its action waits fail, as when every GET /actions fails; the creation
// timeout; a failed step of a resumed flow) does not trust what it saw
// before: where every failing flow ends, it looks its server up (GET
// /servers/{id}) and deletes it only if it provably never ran:
//
//	initializing                              never ran: deleted
//	off, and its action history (GET          never ran: deleted
//	/servers/{id}/actions) reaches back to
//	its create_server with nothing but the
//	create and network attachments
//	succeeded or running
//	off after a start, or its history         kept
//	unreadable or incomplete
//	starting, or off while a start action     looked up again until the
//	runs                                      start ends; kept if it has
//	                                          not within 30 s
//	running, stopping, migrating,             kept
//	rebuilding, unknown
//	the look-up fails                         kept (as "unknown" until
//	                                          the next listing)
//	gone or deleting                          nothing to do
//
// "Created stopped" (a subnet pool's server before its power-on) and "off
// after a start" look the same in a listing; the history tells them
// apart. A kept server replaces its claim at once, counted once, and is
// reported as its status says (Running, no error): min size protects it
// and the autoscaler's unready-node handling, with drain, applies; a
// resumed flow does not take it up again while its status stays the
// same. The server of a claim the autoscaler deleted (DeleteInstances) is
// deleted whatever it did.
//
// # Deleting and shrinking
//
// [Pool.DeleteInstances] accepts provider IDs, claim IDs and node names;
// every id must belong to the pool, else nothing is deleted. It refuses to
// take the target below min for servers and pending claims, but failed
// creations are always removable (the autoscaler deletes failed instances
// without a min-size cap): placeholders, at no API call, and servers
// reported as "not-started" (never run, see "Server lifecycle"); a server
// that has run keeps min size, whatever status it is in. A pending claim
// is cancelled; if its create request is in flight, its flow deletes the
// server once it exists. Delete requests run concurrently (bounded by
// [WithDeleteConcurrency]); the servers count as deleting at once, and
// their actions are awaited in the background, each on its own (the
// Waiter still polls them in shared batches): a delete action that fails,
// vanishes or times out makes that one server count again, not the rest
// of the call's servers. A delete request that fails on the way (the
// connection dropped, its deadline passed) is resolved by looking the
// server up: gone or deleting counts as deleted, otherwise the request is
// sent again while the caller waits. A server whose delete fails counts
// again.
//
// An ambiguous outcome is resolved before it is reported: the caller's
// context bounds only the wait before a delete request is sent. Once sent,
// the request, hcloud-go's retries of it and the look-up that resolves a
// failure run on a context of their own (at most 2 minutes, whatever the
// caller's deadline), so that a delete the API accepted after the
// autoscaler's deadline passed is answered as the success it is, and the
// server counts as deleting, instead of an error (the autoscaler would
// untaint the drained node and record a failed scale-down while the
// server is destroyed). A call whose context ended before anything was
// sent fails and changes nothing.
// [Pool.ForceDeleteInstances] skips the min-size check.
//
// A server being deleted leaves the target at once (as the autoscaler
// expects after DeleteNodes, and as its built-in provider does) but holds
// its slot under max until its delete action succeeds: the max check of
// IncreaseSize and AtomicIncreaseSize counts the target plus the deletes
// in flight (servers we delete, servers listed as deleting, cancelled
// claims whose create was sent), since a delete action that fails makes
// its server count again. A scale-up of a pool at max in the seconds
// while a delete runs fails with [ErrAboveMax] (the autoscaler backs the
// group off and tries another), rather than ending above max. The server
// of a failed create flow whose delete fails counts as the pool's at once,
// not from the next listing.
//
// [Pool.DecreaseTargetSize] removes claims that have no server (queued
// ones first, then placeholders) and never drops the target below the
// servers that exist. A larger request is clamped: it removes what it can
// and returns nil. The answer follows from the autoscaler's two callers
// (core at 33c3f97bf2):
//
//   - ClusterStateRegistry.updateScaleRequests reverts a timed-out
//     scale-up with DecreaseTargetSize(-increase) and only logs an error.
//     Removing the claims that are still queued is the point; the servers
//     that exist stay and are handled as unregistered nodes.
//   - fixNodeGroupSize (static_autoscaler.go) calls it when
//     GetIncorrectNodeGroupSize (updateIncorrectNodeGroupSizes) has seen,
//     for longer than max-node-provision-time, fewer registered nodes than
//     the target minus the instances expected to register. On nil it
//     reports "fixed" and RunOnce skips the rest of the iteration; on an
//     error RunOnce returns it, which also skips the iteration, and
//     RunAutoscalerOnce then does not call UpdateLastSuccessfulRun, so a
//     condition that repeats fails the autoscaler's health check and its
//     liveness probe restarts it after --max-failing-time, without
//     changing the condition. No answer keeps that iteration going; nil at
//     least keeps the autoscaler alive.
//
// So the pool keeps fixNodeGroupSize from asking for what it cannot do:
// every unit of TargetSize is either a registered node, an instance the
// autoscaler expects to register (expectedToRegister: not Deleting, no
// error info), a placeholder that DecreaseTargetSize removes, or a failed
// creation that deleteCreatedNodesWithErrors deletes earlier in the same
// loop. That is why only failed creations carry error info: a server in
// status "unknown" reported with error info would be none of these when it
// has no node, and every iteration of the whole autoscaler (all groups)
// would be skipped once max-node-provision-time passed. Without error
// info it counts as unregistered, and removeOldUnregisteredNodes deletes
// it if it never gets a node.
//
// # Template node
//
// [Pool.TemplateNode] builds the node a server of the pool will become,
// for scale-from-zero: kubernetes.io/hostname "<pool>-template", instance
// type (stable and beta label), region and zone (stable and beta; the zone
// is HCCM's value, see [Zone]), arch, os, csi.hetzner.cloud/location,
// instance.hetzner.cloud/provided-by=cloud, hcloud/node-group, then the
// pool's labels (which may override these) and taints, and a Ready
// condition. Capacity is the server type's cores, memory (GB × 2³⁰ bytes),
// disk and maxPods (110 unless set). Allocatable never promises more than
// a real node has:
//
//	cpu      capacity − reserved.cpu, or without it the kube-reserved
//	         estimate: 6% of the first core, 1% of the second, 0.5% of
//	         cores 3-4, 0.25% of every further core
//	memory   capacity − reserved.memory, or without it 25% of the first
//	         4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next
//	         112, 2% above 128 GiB; always minus the 100 MiB eviction
//	         threshold and the guest-memory shortfall (5% + 100 MiB of the
//	         advertised memory, which the guest kernel never reports)
//	storage  capacity − 10% (the nodefs eviction threshold) −
//	         reserved.ephemeral-storage
//
// The pool's reserved values replace the kube-reserved estimate rather
// than adding to it, because they describe what the node's kubelet
// reserves; eviction thresholds and the memory shortfall are not
// reservations and always apply.
//
// # Price and options
//
// [Pool.Price] is the hourly net price of the server type in the pool's
// location times the hours, from the catalogue in memory.
// [Pool.Options] lays the pool's autoscaling settings over the
// autoscaler's defaults ([AutoscalingOptions] mirrors its
// NodeGroupAutoscalingOptions).
//
// # Restart safety
//
// Nothing that decides whether a server exists lives only in memory: a
// new Pool over the same project sees the same target and instances,
// because every server carries the pool's labels and the cache lists them.
// Claims lost with the process are either servers by then or never sent.
// Placeholders of failed claims are memory only: they stand for servers
// that do not exist, so a restart drops them, and the autoscaler sees the
// target shrink by them as if it had deleted them.
//
// A restart finishes the create flows it finds. [Pool.Resume] (a Cluster
// calls it after its first listing and after every Refresh) recognises a
// flow left unfinished from what the API shows, so it needs no marker and
// handles servers created by any version:
//
//	initializing, starting, younger than  wait until it runs (its create
//	the creation timeout                  or power-on runs)
//	off, subnet pool, its action history  attach with the range if not
//	proves it was left before its         attached, power on (any age)
//	power-on: it reaches back to
//	create_server, nothing but the
//	create and network attachments
//	succeeded, no start tried before an
//	attachment
//	off, anything else: stopped or        left alone (any age)
//	detached by someone, created
//	started, history incomplete
//	anything else                         left alone
//
// Only a server that provably never ran is finished, as on a failed
// flow's end (see "Create flows never delete what ran"): a node someone
// stopped or detached (to isolate it, say) stays so after any restart,
// hand-over or Refresh, and a reload that gives a pool a subnet range
// does not attach or power on its stopped servers. The listing only says
// "off"; the flow looks the server up (one GET, and its action history,
// 50 actions per GET) before it decides; a history that cannot be read
// leaves the server alone until the next Refresh tries again. A
// server it leaves alone is not looked at again until a listing shows it
// in another status. While its flow runs, a resumed server is a claim
// with a server: Creating under its provider ID, counted once in
// TargetSize, removable with DeleteInstances (the flow then deletes it).
// Once the flow sees it run it goes into the cache as running, without
// waiting for the next listing; the flow polls the server at pauses
// doubling from one waiter interval up to ten while an action of unknown
// ID runs on it. A resumed flow that fails ends as any create
// flow does (see "Create flows never delete what ran"): a young server
// listed as starting because a node that ran was reset, and then shut
// down, is kept, not deleted. One whose look-ups fail until the creation
// timeout leaves the server alone.
//
// Two processes may finish the same flow for a while (the old one has not
// stopped yet). Every step tolerates the other: a locked server is waited
// for, "server_already_attached" counts as attached, and a power-on that
// is refused while the server starts or runs counts as powered on; so
// neither process fails, and neither deletes the server.
//
// # Waiting for actions
//
// A pool waits for its actions with the process's shared
// [actionwait.Waiter] ([Deps].Waiter), which polls the actions of every
// caller together; its package documentation explains the schedule. A
// pool waits for its creates as "<server type>/<location>", so that the
// waiter learns their durations per offering.
//
// # Metrics and logs
//
// Metrics are in internal/metrics (hcloudscale_pool_*, hcloudscale_server_*,
// hcloudscale_unavailable_offerings; the waiter's hcloudscale_action_* with
// [actionwait.WithRegisterer]), registered through [WithRegisterer] and, for a
// shared registry, [NewOfferings]: register-or-reuse, so pools on one
// registerer share their collectors. Gauges are updated on every change. The
// pool logs with zap as "pool" with a pool field; user data, root
// passwords and tokens are never logged.
package pool
