module github.com/hcloudscale/hcloudscale/e2e

go 1.26.0

require (
	github.com/hcloudscale/hcloudscale v0.0.0
	github.com/hcloudscale/hcloudscale/adapter v0.0.0
	github.com/hetznercloud/hcloud-go/v2 v2.52.0
	github.com/prometheus/client_golang v1.25.0
	go.uber.org/zap v1.28.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	k8s.io/component-base v0.37.2
	k8s.io/klog/v2 v2.140.0
	sigs.k8s.io/cluster-autoscaler v0.0.0-20260821162314-33c3f97bf274
	sigs.k8s.io/yaml v1.6.0
)

// Until hcloudscale publishes release tags, the suite builds against the
// library and the adapter in this repository.
replace (
	github.com/hcloudscale/hcloudscale => ../
	github.com/hcloudscale/hcloudscale/adapter => ../adapter
)
