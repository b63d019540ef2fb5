package adapter_test

import (
	"context"
	"log"

	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale/adapter"
)

// Register in an init function of the autoscaler build, for example in
// its cloudprovider/router package; the deployment then passes
// --cloud-provider=hcloudscale.
func ExampleRegister() {
	adapter.Register("hcloudscale")
}

// New is the constructor behind Register, for programs that drive the
// autoscaler's interfaces themselves: it returns every configuration
// problem instead of exiting.
func ExampleNew() {
	ctx := context.Background()
	p, err := adapter.New(ctx,
		cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: []string{"0:10:cpx31:fsn1:workers"}},
		adapter.WithLogger(adapter.NewKlogLogger()),
	)
	if err != nil {
		log.Fatal(err) // every problem, each naming its setting
	}
	defer p.Cleanup()
	if err := p.Refresh(); err != nil {
		log.Print(err)
	}
}
