module github.com/hcloudscale/hcloudscale/adapter

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/hcloudscale/hcloudscale v0.0.0
	github.com/hetznercloud/hcloud-go/v2 v2.52.0
	github.com/prometheus/client_golang v1.25.0
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	k8s.io/component-base v0.37.2
	k8s.io/component-helpers v0.37.2
	k8s.io/klog/v2 v2.140.0
	sigs.k8s.io/cluster-autoscaler v0.0.0-20260821162314-33c3f97bf274
)

// Until hcloudscale publishes release tags, the adapter builds against the
// library in the parent directory. A module that requires the adapter
// needs the same replace (see README.md).
replace github.com/hcloudscale/hcloudscale => ../
