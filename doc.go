// Package hcloudscale autoscales Kubernetes worker-node pools on Hetzner
// Cloud.
//
// It is a library first: [config] reads and validates the settings of the
// Cluster Autoscaler's Hetzner provider (the same environment variables,
// --nodes specs and cluster-config JSON), imageresolve picks the image per
// architecture, servercache keeps one label-selected listing of the
// cluster's servers, and pool scales one node pool. This package wires them
// into a Cluster.
package hcloudscale

