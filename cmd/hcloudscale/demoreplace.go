package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/pool"
)

// The replacement scene moves workers-fsn1 from demoImageFrom, which
// demo.json gives it, to demoImageTo.
const (
	demoImageFrom = "ubuntu-22.04"
	demoImageTo   = "ubuntu-24.04"
)

// demoConfigWithImage is the demo's cluster config with workers-fsn1 on
// image.
func demoConfigWithImage(image string) string {
	return strings.Replace(demoClusterConfig, `"amd64": "`+demoImageFrom+`"`, `"amd64": "`+image+`"`, 1)
}

// syncNodes lets the simulated cluster's kubelets follow the servers.
func (d *demo) syncNodes() {
	servers, _ := d.api.Servers(config.LabelCluster + "=demo")
	d.kube.Sync(servers)
}

// replaceImage changes the image of workers' configuration and lets the
// node lifecycle replace its node, surge-first, against the simulated
// cluster, as serve --replace-nodes does.
func (d *demo) replaceImage(ctx context.Context, workers *pool.Pool) error {
	d.printf("\n4. A new image: %s moves from %s to %s; the node lifecycle replaces its node\n", workers.Name(), demoImageFrom, demoImageTo)
	d.syncNodes()
	d.config = demoConfigWithImage(demoImageTo)
	cfg, err := d.loadConfig(d.config)
	if err != nil {
		return err
	}
	if err := d.cluster.Reconfigure(ctx, cfg); err != nil {
		return fmt.Errorf("reconfiguring the cluster: %w", err)
	}
	client, err := d.kube.Client()
	if err != nil {
		return err
	}
	ctrl, err := lifecycle.New(d.cluster, client, lifecycle.WithLogger(d.log))
	if err != nil {
		return err
	}
	defer ctrl.Close()
	plan, err := ctrl.Plan(ctx)
	if err != nil {
		return fmt.Errorf("planning: %w", err)
	}
	d.printf("   The pool's imagesForArch now names %s, and its replace is {\"drift\": [\"image\"]}.\n", demoImageTo)
	d.printf("   A simulated cluster (%s) has a Ready node per running server. replace --plan:\n", d.kube.URL())
	var buf bytes.Buffer
	printReplacePlan(&buf, plan)
	for line := range strings.Lines(buf.String()) {
		if strings.TrimSpace(line) == "" {
			d.printf("\n")
			continue
		}
		d.printf("     %s", line)
	}
	d.printf("   serve --replace-nodes steps the lifecycle (every 15 s by default; here every %s):\n", d.t.sample)
	return d.roll(ctx, ctrl, workers)
}

// roll steps ctrl until workers has no replacement left to do, printing a
// line whenever the pool, its servers or the plan change.
func (d *demo) roll(ctx context.Context, ctrl *lifecycle.Controller, workers *pool.Pool) error {
	began := time.Now()
	tick := time.NewTicker(d.t.sample)
	defer tick.Stop()
	last, most := "", 0
	for {
		d.syncNodes()
		plan, err := ctrl.Step(ctx)
		if err != nil {
			return fmt.Errorf("a step of the node lifecycle: %w", err)
		}
		servers, _ := d.api.Servers(config.LabelNodeGroup + "=" + workers.Name())
		most = max(most, len(servers))
		if draining(plan) && d.readyNodes(servers) < 2 {
			return fmt.Errorf("%s: a node drains while its replacement is not Ready", workers.Name())
		}
		line := d.poolLine(workers) + "; lifecycle: " + planSummary(plan)
		if line != last {
			last = line
			d.printf("   [%4.1fs] %s\n", time.Since(began).Seconds(), line)
		}
		drift, _ := d.cluster.Drift(ctx)
		st := workers.Status()
		if plan != nil && len(plan.Steps) == 0 && len(drift[workers.Name()]) == 0 && st.Running == st.Target && st.Deleting == 0 {
			d.printf("   replaced after %s: no server of %s differs from its configuration; it had %d servers\n", since(began), workers.Name(), most)
			d.printf("   at most (the surge), and the old node was drained only beside a Ready replacement\n")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the replacement in %s: %w", workers.Name(), ctx.Err())
		case <-tick.C:
		}
	}
}

// draining reports whether a node of p is being drained.
func draining(p *lifecycle.Plan) bool {
	return p != nil && slices.ContainsFunc(p.Steps, func(st lifecycle.Step) bool { return st.Phase == lifecycle.PhaseDraining })
}

// readyNodes counts the Ready nodes of servers in the simulated cluster.
func (d *demo) readyNodes(servers []hcloudtest.ServerInfo) int {
	names := map[string]bool{}
	for _, sv := range servers {
		names[sv.Name] = true
	}
	n := 0
	for _, node := range d.kube.Nodes() {
		for _, c := range node.Status.Conditions {
			if names[node.Name] && c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// planSummary is one plan in a few words: each node and what it does.
func planSummary(p *lifecycle.Plan) string {
	if p == nil || len(p.Steps) == 0 {
		return "nothing due"
	}
	var parts []string
	for _, st := range p.Steps {
		what := string(st.State)
		if st.State == lifecycle.StateInProgress {
			what = string(st.Phase)
		}
		parts = append(parts, st.Node+" "+what)
	}
	return strings.Join(parts, ", ")
}

// keep leaves the fake API and the simulated cluster running until ctx
// ends, with the files and environment that point status and replace
// --plan of another process at them.
func (d *demo) keep(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "hcloudscale-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	configPath, kubeconfig := filepath.Join(dir, "cluster-config.json"), filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(configPath, []byte(d.config), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, d.kube.Kubeconfig(), 0o600); err != nil {
		return err
	}
	d.printf("\nKept running until interrupted (Ctrl-C): the fake API and the simulated cluster.\n")
	d.printf("Point the other commands at them from another shell:\n\n")
	exports := [][2]string{
		{config.EnvToken, d.api.Token()}, {config.EnvEndpoint, d.api.URL()},
		{config.EnvNetwork, "demo-network"}, {config.EnvFirewall, "demo-nodes"}, {config.EnvSSHKey, "demo-ops"},
		{config.EnvClusterConfigFile, configPath}, {"KUBECONFIG", kubeconfig},
	}
	// A variable of another configuration left in the shell would change
	// the demo's, or outrank its file (HCLOUD_CLUSTER_CONFIG).
	unset := slices.DeleteFunc(config.EnvNames(), func(name string) bool {
		return slices.ContainsFunc(exports, func(kv [2]string) bool { return kv[0] == name })
	})
	d.printf("  unset %s\n", strings.Join(unset, " "))
	for _, kv := range exports {
		d.printf("  export %s=%s\n", kv[0], kv[1])
	}
	nodes := "--nodes=" + strings.Join(demoNodes, " --nodes=")
	d.printf("\n  go run ./cmd/hcloudscale status %s\n", nodes)
	d.printf("  go run ./cmd/hcloudscale replace --plan %s\n", nodes)
	d.printf("\nChange an image in %s (%s back to %s, say) and replace --plan shows\n", configPath, demoImageTo, demoImageFrom)
	d.printf("the nodes the lifecycle would replace; nothing is replaced while the demo waits.\n")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.printf("\nStopped; %s removed.\n", dir)
			return nil
		case <-tick.C:
			d.syncNodes()
		}
	}
}
