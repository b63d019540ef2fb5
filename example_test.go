package hcloudscale_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// A Cluster on a fake Hetzner API: the configuration comes from the
// environment the autoscaler's Hetzner provider reads, and a pool scales
// up as the autoscaler asks it to.
func ExampleNew() {
	// Actions finish at once, so the example does not wait for them.
	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	defer api.Close()

	clusterConfig := `{
	  "clusterName": "prod",
	  "imagesForArch": {"amd64": "ubuntu-24.04"},
	  "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}
	}`
	env := config.MapEnv(map[string]string{
		"HCLOUD_TOKEN":          api.Token(),
		"HCLOUD_ENDPOINT":       api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString([]byte(clusterConfig)),
	}, nil)
	cfg, err := config.Load(env, []string{"0:3:cx23:fsn1:workers"})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	c, err := hcloudscale.New(ctx, cfg,
		hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	workers := c.Pool("workers")
	if err := workers.IncreaseSize(ctx, 2); err != nil {
		fmt.Println(err)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for workers.Status().Running < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := workers.Status()
	fmt.Printf("target %d, %d running\n", st.Target, st.Running)
	servers, _ := api.Servers("hcloud/node-group=workers,hcloudscale/cluster=prod")
	for _, s := range servers {
		fmt.Println(s.ServerType, s.Location, s.Status)
	}
	// Output:
	// target 2, 2 running
	// cx23 fsn1 running
	// cx23 fsn1 running
}
