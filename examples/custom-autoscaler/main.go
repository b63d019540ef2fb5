// Command custom-autoscaler keeps one Hetzner Cloud pool at a size derived
// from a queue length, using hcloudscale as a library instead of the
// Kubernetes Cluster Autoscaler: a worker fleet for a job queue, say.
//
//	export HCLOUD_TOKEN=... HCLOUD_CLUSTER_CONFIG_FILE=cluster-config.json
//	go run ./examples/custom-autoscaler --nodes=0:20:cpx31:fsn1:workers \
//	    --queue-url=http://jobs.internal/queue-length --per-node=10
//
// Every --interval it reads the queue length (a plain number from
// --queue-url), computes ceil(queue / per-node) clamped to the pool's min
// and max size, and moves the pool there: IncreaseSize to grow (it returns
// at once; the servers are created in the background), DeleteInstances on
// the newest servers to shrink. The configuration is the same as for the
// autoscaler's Hetzner provider; see the config package.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "custom-autoscaler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("custom-autoscaler", flag.ContinueOnError)
	nodes := fs.String("nodes", "", "the pool, as "+config.NodeSpecFormat)
	queueURL := fs.String("queue-url", "", "URL whose body is the queue length, a plain number")
	perNode := fs.Int("per-node", 10, "jobs one server handles")
	interval := fs.Duration("interval", 30*time.Second, "time between two decisions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes == "" || *queueURL == "" || *perNode < 1 || *interval <= 0 {
		return errors.New("--nodes and --queue-url are required, --per-node and --interval must be positive")
	}
	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	cfg, err := config.LoadFromOS([]string{*nodes})
	if err != nil {
		return err
	}
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		// Let creates in flight reach a safe point before exiting.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Close(cctx)
	}()
	a := &autoscaler{
		cluster:  c,
		pool:     c.Pools()[0],
		queue:    httpQueue(*queueURL),
		perNode:  *perNode,
		interval: *interval,
		log:      log,
	}
	err = a.loop(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// QueueLength reports how many jobs wait.
type QueueLength func(ctx context.Context) (int, error)

// httpQueue reads the queue length from a URL that answers with a number.
func httpQueue(url string) QueueLength {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("queue length: %s answered %s", url, resp.Status)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(body)))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("queue length: %s answered %q, want a non-negative integer", url, body)
		}
		return n, nil
	}
}

// Desired is the pool size for a queue: one server per perNode jobs,
// rounded up, within the pool's min and max size.
func Desired(queue, perNode, minSize, maxSize int) int {
	n := (queue + perNode - 1) / perNode
	return max(minSize, min(maxSize, n))
}

type autoscaler struct {
	cluster  *hcloudscale.Cluster
	pool     *pool.Pool
	queue    QueueLength
	perNode  int
	interval time.Duration
	log      *zap.Logger
}

// loop decides once per interval until ctx ends. A failed decision is
// logged and tried again at the next tick.
func (a *autoscaler) loop(ctx context.Context) error {
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	for {
		if err := a.step(ctx); err != nil {
			a.log.Warn("scaling step failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// step reads the queue and moves the pool to the size it needs.
func (a *autoscaler) step(ctx context.Context) error {
	if err := a.cluster.Refresh(ctx); err != nil {
		return err
	}
	queue, err := a.queue(ctx)
	if err != nil {
		return err
	}
	p := a.pool
	// A create that failed leaves a placeholder; drop it so that the
	// target is what exists and the next step asks again. (The Cluster
	// Autoscaler would try another pool instead.)
	var failed []string
	for _, in := range p.Instances() {
		if in.Error != nil && in.ServerID == 0 {
			failed = append(failed, in.ID)
			a.log.Warn("server create failed", zap.String("instance", in.ID), zap.String("code", in.Error.Code), zap.String("message", in.Error.Message))
		}
	}
	if len(failed) > 0 {
		if err := p.DeleteInstances(ctx, failed); err != nil {
			return err
		}
	}

	want := Desired(queue, a.perNode, p.MinSize(), p.MaxSize())
	target := p.TargetSize()
	switch {
	case want > target:
		a.log.Info("scaling up", zap.Int("queue", queue), zap.Int("from", target), zap.Int("to", want))
		// Returns at once; an offering that just failed for lack of
		// capacity fails here (pool.ErrOfferingUnavailable) until it is
		// retried.
		return p.IncreaseSize(ctx, want-target)
	case want < target:
		a.log.Info("scaling down", zap.Int("queue", queue), zap.Int("from", target), zap.Int("to", want))
		// Claims without a server first: they cost nothing.
		if err := p.DecreaseTargetSize(ctx, want-target); err != nil {
			return err
		}
		excess := p.TargetSize() - want
		if excess <= 0 {
			return nil
		}
		return p.DeleteInstances(ctx, newest(p.Instances(), excess))
	}
	return nil
}

// newest returns the IDs of the n newest servers that are not being
// deleted. Server IDs grow with creation time.
func newest(ins []pool.Instance, n int) []string {
	ins = slices.DeleteFunc(ins, func(in pool.Instance) bool { return in.ServerID == 0 || in.State == pool.Deleting })
	slices.SortFunc(ins, func(a, b pool.Instance) int {
		switch {
		case a.ServerID > b.ServerID:
			return -1
		case a.ServerID < b.ServerID:
			return 1
		}
		return 0
	})
	var ids []string
	for _, in := range ins[:min(n, len(ins))] {
		ids = append(ids, in.ID)
	}
	return ids
}
