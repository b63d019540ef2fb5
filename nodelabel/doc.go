// Package nodelabel adds the labels and taints of a node's pool to the
// node once it has registered: what the kubelet cannot set itself, or what
// a pool's cloud-init does not set.
//
// The NodeRestriction admission plugin stops a kubelet from setting labels
// in the kubernetes.io and k8s.io namespaces beyond a fixed set
// (node-role.kubernetes.io/worker, anything under
// node-restriction.kubernetes.io, ...; see cloudinit.KubeletMaySet), so
// no cloud-init can put them on a node. The labeller runs with its own
// credentials and can.
//
// # What it does
//
// A [Labeller] watches the nodes with a client-go informer. A node belongs
// to a pool when [Pools] (an hcloudscale.Cluster) finds its server: by the
// provider ID hcloud://<server id>, or by the node name while the provider
// ID is empty (before the cloud controller manager has set it). Nodes with
// other provider IDs, and nodes whose servers belong to no pool of this
// Cluster (other pools, other clusters, control-plane servers), are never
// changed.
//
// For a node of a pool it handles, in one update, every label and taint
// of the pool that it has not handled on that node before (as recorded in
// [AppliedAnnotation]):
//
//   - a label whose key the node lacks is added (all of them, not only
//     the restricted ones, so that a cloud-init that sets none still gets
//     a node that matches the autoscaler's template); a label the node
//     has with another value is kept and logged (kept_labels);
//   - a taint whose key and effect the node lacks is added; a taint the
//     node has with the same key and effect but another value is kept and
//     logged (kept_taints), as a label is;
//   - the annotations [Annotation] (the pool's name) and
//     [AppliedAnnotation] (the pool's label keys and taint keys and
//     effects) record what it handled.
//
// # Config changes
//
// One rule, whatever the pool had before: what the pool's config gains
// (but a NoExecute taint; see below) reaches the nodes already labelled (at the first resync after a
// restart with the new config), and what the labeller handled before is
// not added again, so a label or taint someone removes by hand stays
// removed. A pool that had no labels and taints is no exception: its
// nodes get what is added to it. What is removed from the pool's config
// stays on the nodes: the labeller never removes a label or taint, since
// it cannot tell its own from one that someone or the kubelet set with
// the same key, and pods may select nodes by it; remove it by hand
// (kubectl label nodes -l <selector> key-). A node handled by a version
// that recorded only [Annotation] counts as handled for the pool's labels
// and taints it carries. Deleting [Annotation] has the node labelled
// again, all of it. A node that re-registers (deleted and created by its
// kubelet) has no annotation and is labelled again.
//
// A NoExecute taint is the exception: it evicts at once every pod of the
// node that does not tolerate it, so the labeller adds it only at a
// node's first labelling (no [Annotation]) while the node is not Ready.
// Such a node runs no workload: until it is Ready the node lifecycle
// controller keeps node.kubernetes.io/not-ready:NoSchedule on it, and the
// scheduler places only pods that tolerate that (DaemonSet pods, which
// the pool's taint is meant to govern as well). A node labelled before,
// or Ready when first seen, already runs: the NoExecute taint is not
// added, it is recorded as handled (resyncs do not come back to it), and
// a warning names it. Such a taint reaches running nodes only by their
// replacement.
//
// Taints added after registration can come too late for pods already
// scheduled; a NoSchedule taint is best registered by the kubelet
// (cloudinit's .KubeletFlags and friends), which the labeller then finds
// present, and so is a NoExecute taint that must be on every node.
//
// # When
//
// A node is handled when it appears or changes, and at every resync
// ([WithResync], default one minute; the labeller's own, so that
// [WithClock] drives it) while something of its pool is not handled: a node that
// registers before the Cluster's server listing shows its server is
// handled at the first resync after the listing does. A failed update is
// retried with exponential backoff per node ([WithBackoff], 1 s doubling
// up to 5 minutes); resyncs and node updates do not cut the backoff short.
//
// # Permissions
//
// The labeller needs list, watch and update on nodes (a ClusterRole;
// charts/hcloudscale makes it; it reads nodes from its informer cache and
// never gets one).
package nodelabel
