// Package lifecycle keeps the nodes of an hcloudscale.Cluster current: it
// replaces the nodes that drifted from their pool's configuration, aged
// past the pool's expireAfter, have not been Ready for its repairAfter, or
// belong to a pool removed from the configuration, one budgeted step at a
// time, surge-first and drained through the Eviction API. The rules, and
// what the Cluster Autoscaler does meanwhile, are in
// docs/keeping-nodes-current.md.
//
// # One replacement
//
// A Controller's Step reads the pools (servers, claims, drift) from the
// Cluster's memory and the nodes from Kubernetes, and for each node due
// (Run steps when a node registers, turns Ready or goes, a drain ends, an
// old server's delete ends or a configuration is applied, and every
// interval in any case):
//
//  1. surging: pool.Pool.Surge creates a replacement in the node's pool,
//     labelled config.LabelReplaces with the old server's ID; the target
//     rises by one at once (above max by at most maxSurge). A node due
//     for config.DriftOffering (a pool with several offerings, the node
//     on a later one while an earlier one is available) gets its
//     replacement in that earlier offering's node group (Step.Into); the
//     old server stays in its own group until it is deleted. Once the
//     replacement's node registers it gets the autoscaler's
//     ScaleDownDisabledAnnotation (and ProtectsAnnotation).
//  2. draining: once the replacement's node is Ready and schedulable, the
//     old node is marked (ReplacementAnnotation), cordoned and drained with
//     package nodedrain: PodDisruptionBudgets hold, DaemonSet and mirror
//     pods stay, a pod marked not to be disrupted stops the drain.
//  3. deleting: the old server is deleted through its pool (fenced by the
//     Lease with hcloudscale.WithFence). Once it is gone the replacement's
//     protection is lifted.
//
// A replacement that is not Ready within the pool's joinTimeout, or whose
// create failed, is deleted and the old node left as it is; a drain that
// does not finish within drainTimeout uncordons the old node. Both leave a
// Stop (StoppedAnnotation) on the old node, and the pool starts nothing
// new for retryAfter. A stopped drain cordons its replacement and deletes
// it when it then holds nothing but DaemonSet and mirror pods, and
// otherwise uncordons it and keeps it as an ordinary node for the
// autoscaler's scale-down to judge.
//
// Each step re-checks what it stands on: before every eviction and before
// the old server's delete, the replacement must exist, be Ready and
// schedulable and not be being deleted (by its pool, in Hetzner, or as
// its Node: a deletion timestamp or the autoscaler's
// ToBeDeletedByClusterAutoscaler taint). A replacement being deleted is
// never one; when it goes mid-drain, the drain stops at once and the old
// node is uncordoned. A node of a removed pool is drained out without a
// replacement (its pods move to the other pools, the autoscaler scaling
// them up) when the cluster's replace.removedPools is set; a pool
// configured again stops its drain-outs like a replacement gone. An offering
// taken out of a configured pool's list is no removed pool: its nodes run
// under the pool's settings, and with drift offering they are moved back
// to the first available offering, surge-first, like a later offering's.
//
// A repair (ReasonNotReady) is not drained: once its replacement is Ready
// the old node, still not Ready, is cordoned and its server deleted, as
// its pods cannot stop there. Before each attempt to delete it the repair
// asks again: a node Ready again is drained instead. It is not held by the windows, nor by pods
// or budgets, but by the cluster's replace.repairMaxUnhealthy: no repair
// starts while more nodes than that are unhealthy.
//
// # Budgets and windows
//
// A pool of several offerings is one pool here: its maxInFlight, its max
// size + maxSurge and its retryAfter count across its node groups.
//
// A node starts only while: neither the cluster nor its pool is paused;
// one of its windows is open (the pool's, else the cluster's, else any
// time); its pool has fewer than maxInFlight replacements in progress and
// the cluster fewer than replace.maxInFlight; its pool's last stop is
// older than retryAfter; the surge fits maxSurge; the offering its
// replacement goes to is not sold out; its server runs and its
// node is Ready and not cordoned by someone else; and no pod on it would
// hold the drain (nodedrain.Blockers, under the pool's evictUnreplicatedPods,
// evictLocalStoragePods and evictKubeSystemPods: by default a pod without a
// controller, with local storage, or young in kube-system without a
// budget holds its node, as in the Cluster Autoscaler). Plan reports what
// holds each node; a node that cannot start holds no slot of maxInFlight.
// A replacement holds its slot until its old server is gone: a delete the
// pool has asked for but whose action has not ended may yet fail (the pool
// then lists the server again), so it counts until then.
//
// # State
//
// Nothing of a replacement lives only in memory: the replacement server's
// label, the old node's mark and stop, and the replacement node's
// protection are the state, so that a restart or a new leader finishes
// each replacement where it stood: a drain starts again, a replacement
// whose old server is gone is finished, a mark whose replacement is gone
// is undone.
//
// # Turned off
//
// Controller.RollBack, for a process that runs without the lifecycle,
// finishes a replacement whose old node is drained beside a Ready
// replacement and rolls back every other one: the old node uncordoned, the
// annotations removed, the replacement deleted while it holds nothing but
// DaemonSet and mirror pods (else kept, unprotected). WithRollBackDeletes
// keeps its server deletes to some pools, for a tool whose scope is those.
package lifecycle
