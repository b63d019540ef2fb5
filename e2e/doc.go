// Package e2e runs the Kubernetes Cluster Autoscaler's own loop over
// hcloudscale, on [hcloudtest] underneath, so that what the autoscaler
// does with our answers is tested rather than assumed.
//
// The tests build a real autoscaler with the core's in-memory integration
// framework (sigs.k8s.io/cluster-autoscaler/pkg/test/integration: the
// production builder with a fake clientset), put our in-process adapter in
// with WithCloudProvider, and call StaticAutoscaler.RunOnce every second
// on the real clock. The fake Kubernetes has no kubelet and no scheduler;
// this package provides both, small:
//
//   - [Kubelet] registers a Node for each running server of a pool, as a
//     real node of that server type reports itself (not from any
//     provider's template), marks it NotReady while its server is not
//     running, and deletes it when the server is gone. It can withhold a
//     server for good or register it late.
//   - [Scheduler] binds pending pods first fit, respecting node selectors,
//     taints and allocatable resources, and marks the rest unschedulable,
//     which is what the autoscaler reacts to.
//
// The module is not part of the main module's build: it needs checkouts of
// the autoscaler sources, which the Go module proxy does not serve. See
// README.md for how to run it.
package e2e
