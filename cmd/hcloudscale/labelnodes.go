package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/nodecache"
	"github.com/hcloudscale/hcloudscale/nodelabel"
)

// labelFlags are the node labeller's flags of serve.
type labelFlags struct {
	enabled    bool
	kubeconfig string
}

func (l *labelFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.enabled, "label-nodes", false, "add each pool's labels and taints to its nodes once they register (the node labeller; needs list, watch and update on nodes)")
	fs.StringVar(&l.kubeconfig, "kubeconfig", "", "kubeconfig `file` of the cluster for the Lease (--leader-elect) and the nodes (--label-nodes); empty: the file $KUBECONFIG names, else the pod's service account")
}

// labellerStartTimeout bounds the check that the labeller may list nodes.
const labellerStartTimeout = 30 * time.Second

// startLabeller starts the node labeller when --label-nodes is set and
// returns the function that stops it and waits. It fails when the
// Kubernetes API cannot be reached or the nodes cannot be listed, so that
// missing permissions show at start. nodes is serve's shared Node cache.
func startLabeller(ctx context.Context, f *labelFlags, cfg *config.Config, client kubernetes.Interface, nodes *nodecache.Cache, cluster *hcloudscale.Cluster, log *zap.Logger) (stop func(), err error) {
	for _, w := range config.NodeLabelWarnings(cfg, f.enabled) {
		log.Warn(w)
	}
	if !f.enabled {
		return func() {}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, labellerStartTimeout)
	_, err = client.CoreV1().Nodes().List(cctx, metav1.ListOptions{Limit: 1})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("--label-nodes: listing nodes: %w", err)
	}
	return runLabeller(ctx, nodelabel.New(client, cluster, nodelabel.WithLogger(log), nodelabel.WithNodeCache(nodes)), log), nil
}

// runLabeller runs l until the returned stop is called (or ctx ends).
func runLabeller(ctx context.Context, l *nodelabel.Labeller, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := l.Run(ctx); err != nil {
			log.Error("node labeller stopped", zap.Error(err))
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
