// Package hcloudscale autoscales Kubernetes worker-node pools on Hetzner
// Cloud.
//
// It is a library first. Package config reads and validates the settings of
// the Cluster Autoscaler's Hetzner provider (the same environment variables,
// --nodes specs and cluster-config JSON); imageresolve picks the image per
// architecture; servercache keeps one label-selected listing of the
// cluster's servers; pool scales one node pool. This package wires them into
// a [Cluster]:
//
//	cfg, err := config.LoadFromOS([]string{"0:10:cpx31:fsn1:workers"})
//	if err != nil {
//		return err // every problem at once, each naming its setting
//	}
//	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(logger))
//	if err != nil {
//		return err // missing firewalls, sold-out types, images, ...
//	}
//	defer c.Close(ctx)
//	err = c.Pool("workers").IncreaseSize(ctx, 3) // returns at once
//
// # What New checks
//
// Before the first scale-up, [New] looks up every reference once: the
// network and that each subnet range is one of its subnets, each firewall,
// SSH key and placement group (and that the pools sharing a placement group
// fit into its ten places), that each pool's server type exists and is
// available in the pool's location, and that an image exists for the type's
// architecture. Everything wrong is reported together.
//
// # Requests and the API budget
//
// All pools share one client. Requests pass through a pacer that reads the
// RateLimit-* headers and keeps a reserve of the project's hourly budget for
// the other tools that share it, and through a debug log (zap debug level)
// that redacts the token, user data and passwords. Servers are listed once
// per TTL for all pools together; in-flight actions of all pools are polled
// together.
//
// # One writer
//
// Run one Cluster per Kubernetes cluster at a time (the autoscaler's leader
// election, or one replica of hcloudscale serve): claims that have no server
// yet live in memory. Everything else is rebuilt from the API after a
// restart, from the servers' hcloud/node-group labels.
package hcloudscale
