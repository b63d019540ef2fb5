// Package nodedrain cordons a node and moves its pods away through the
// Eviction API, as `kubectl drain` does, so that PodDisruptionBudgets hold:
// the API server refuses an eviction (429 Too Many Requests) that would
// take a budget below what it allows, and Drain tries that pod again later
// instead of deleting it.
//
// # Which pods
//
// Drain evicts every pod bound to the node except:
//   - mirror pods (annotation kubernetes.io/config.mirror): the kubelet
//     owns them, the API cannot evict them;
//   - pods of a DaemonSet (controller owner reference of kind DaemonSet):
//     the DaemonSet would put them back at once, and they go with the node;
//   - pods that have finished (phase Succeeded or Failed).
//
// A pod marked not to be disrupted blocks the drain: annotation
// [DoNotDisruptAnnotation] "true", or the Cluster Autoscaler's
// [SafeToEvictAnnotation] "false". Drain then evicts nothing at all, so a
// node is never left half drained for a pod that will not move; it returns
// a [*BlockedError] naming the pods.
//
// # When it ends
//
// Drain returns nil once the node holds nothing but the pods above (an
// evicted pod counts until it is gone from the API, so a pod still
// terminating keeps Drain waiting). When [Options.Timeout] passes first, it
// returns a [*BlockedError] listing every pod left and why (the API
// server's answer to its last eviction, or that it is still terminating).
// Drain never uncordons: the caller decides whether the node serves again
// ([Uncordon]) or goes.
//
// [Blockers] answers without evicting: which pods would hold a drain now
// (marked not to be disrupted, or covered by a PodDisruptionBudget that
// allows no disruption at the moment).
//
// # RBAC
//
// nodes: get, patch (Cordon, Uncordon); pods: list (Drain, Blockers);
// pods/eviction: create (Drain); poddisruptionbudgets (policy): list
// (Blockers).
package nodedrain
