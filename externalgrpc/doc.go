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
// # Status
//
// So far the package holds only the wire contract; the server over a
// Cluster is not written yet.
package externalgrpc
