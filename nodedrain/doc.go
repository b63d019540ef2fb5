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
//   - pods of a DaemonSet (controller owner reference of kind DaemonSet,
//     or the autoscaler's [DaemonSetPodAnnotation] "true"): the DaemonSet
//     would put them back at once, and they go with the node;
//   - pods that have finished (phase Succeeded or Failed);
//   - pods annotated [SafeToEvictAnnotation] "on-completion": they are
//     left to finish, and Drain waits for them.
//
// # Which pods hold a drain
//
// Drain follows the Cluster Autoscaler's drainability rules
// (kubernetes-sigs/cluster-autoscaler, pkg/simulator/drainability/rules,
// with its default flags): a pod it would not remove a node for is not
// evicted. Such a pod blocks the drain before anything is evicted, so a
// node is never left half drained for a pod that will not move; Drain
// returns a [*BlockedError] naming the pods and the [Rule] of each:
//   - [RuleMarked]: annotated [DoNotDisruptAnnotation] "true" or
//     [SafeToEvictAnnotation] "false";
//   - [RuleUnreplicated]: no controller owns the pod, so nothing would
//     recreate it (a pod of any controller counts as replicated);
//   - [RuleKubeSystem]: a pod of kube-system that no PodDisruptionBudget
//     selects, created less than [KubeSystemHold] ago;
//   - [RuleLocalStorage]: a hostPath volume, or an emptyDir not in
//     memory, that [SafeToEvictLocalVolumesAnnotation] does not list.
//
// [SafeToEvictAnnotation] "true" lifts the last three, as in the
// autoscaler; [Policy] (Options.Policy) lifts each for those who accept
// the loss. Every pod is checked again before each eviction: a pod that
// arrives or is marked while the drain runs is never evicted, and the
// drain ends blocked by it at its timeout. PodDisruptionBudgets are left
// to the Eviction API.

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
// (by the rules above, or covered by a PodDisruptionBudget that allows no
// disruption at the moment).
//
// # RBAC
//
// nodes: get, patch (Cordon, Uncordon); pods: list (Drain, Blockers);
// pods/eviction: create (Drain); poddisruptionbudgets (policy): list
// (Blockers; Drain for a pod of kube-system).
package nodedrain
