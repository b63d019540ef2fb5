module github.com/hcloudscale/hcloudscale/e2e/externalgrpc

go 1.26.0

// Built only in the workspace scripts/ca-workspace-autoscaler.sh writes,
// which uses kubernetes/autoscaler's cluster-autoscaler module and the core
// commit it pins; see ../README.md.
require (
	github.com/hcloudscale/hcloudscale/e2e v0.0.0
	sigs.k8s.io/cluster-autoscaler v0.0.0-20260731143349-6e285e0f4b4f
)

replace (
	github.com/hcloudscale/hcloudscale => ../../
	github.com/hcloudscale/hcloudscale/adapter => ../../adapter
	github.com/hcloudscale/hcloudscale/e2e => ../
)
