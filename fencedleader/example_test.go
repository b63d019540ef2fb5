package fencedleader_test

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/fencedleader"
)

// One writer among replicas: the Leader is the Cluster's fence, its hooks
// list the servers before the first write, and each decision is made in
// its gate under the leadership context. examples/replicated-autoscaler
// is the whole program.
func Example() {
	ctx := context.Background()
	var (
		kube kubernetes.Interface // from a kubeconfig or the pod's service account
		cfg  *config.Config       // from config.LoadFromOS
	)
	lead, err := fencedleader.New(fencedleader.DefaultConfig("autoscaling", "my-autoscaler", "replica-a"), kube)
	if err != nil {
		panic(err)
	}
	cluster, err := hcloudscale.New(ctx, cfg, hcloudscale.WithFence(lead), hcloudscale.WithResumeWhen(lead.Leading))
	if err != nil {
		panic(err)
	}
	if err := lead.Start(ctx, lead.ClusterHooks(cluster)); err != nil {
		panic(err)
	}
	defer lead.HandOver(time.Minute)

	for range time.Tick(10 * time.Second) {
		leave, err := lead.Enter()
		if err != nil {
			continue // a standby decides nothing
		}
		_ = cluster.Pool("workers").IncreaseSize(lead.Context(), 1)
		leave()
	}
}
