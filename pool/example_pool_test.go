package pool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// A Pool on a fake Hetzner API, with the shared parts a Cluster would
// otherwise build: it creates the servers asked for and reports them
// running once their actions have finished.
func ExamplePool_IncreaseSize() {
	// Actions finish at once, so the example does not wait for them.
	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	defer api.Close()
	client := api.Client()
	waiter := actionwait.New(&client.Action, actionwait.WithPollInterval(time.Millisecond))
	defer waiter.Close()
	cache := servercache.New(&client.Server, servercache.WithClusterName("prod"))
	defer cache.Close()
	types := servercache.NewTypeCatalog(&client.ServerType)
	defer types.Close()
	images := imageresolve.New(&client.Image)
	defer images.Close()

	cfg := config.Pool{
		Name:         "workers",
		MinSize:      0,
		MaxSize:      3,
		ServerType:   "cx23",
		Location:     "fsn1",
		CloudInit:    "#cloud-config\n",
		Images:       config.ImagesForArch{AMD64: "ubuntu-24.04"},
		ServerLabels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"},
		PublicIPv4:   true,
		PublicIPv6:   true,
	}
	workers, err := pool.New(cfg, pool.Deps{Servers: &client.Server, Waiter: waiter, Cache: cache, Types: types, Images: images},
		pool.WithClusterName("prod"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	defer workers.Close(ctx)

	if err := workers.IncreaseSize(ctx, 2); err != nil {
		fmt.Println(err)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for workers.Status().Running < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := workers.Status()
	fmt.Printf("target %d, %d running, %d creating\n", st.Target, st.Running, st.Creating)
	for _, in := range workers.Instances() {
		fmt.Println(in.State, in.Status)
	}
	fmt.Println("create requests:", api.Count("POST /servers"))
	// Output:
	// target 2, 2 running, 0 creating
	// running running
	// running running
	// create requests: 2
}
