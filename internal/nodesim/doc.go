// Package nodesim serves a small Kubernetes API on 127.0.0.1 whose nodes
// are the servers of an in-memory Hetzner Cloud API (package hcloudtest),
// for the demo: the node lifecycle and `hcloudscale replace --plan` in
// another process read it through client-go as they read a cluster.
//
// It plays the kubelets: [Server.Sync] registers a Ready node for each
// running server (name the server's, provider ID hcloud://<id>), marks the
// node of a server that does not run NotReady and removes the nodes of
// servers that are gone. It answers what the lifecycle asks: nodes
// (list, get, and merge patches, strategic ones applied as merge patches,
// which is what they are for the fields the lifecycle changes), no pods and
// no PodDisruptionBudgets, and events, which it drops; and what scale and
// cleanup ask before they write: no Leases, so no serve that holds one. Anything else is
// 404 NotFound. Nodes can be watched (informers need it), from a resourceVersion or from
// the start. There is no authentication and no persistence.
package nodesim
