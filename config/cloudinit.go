package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hcloudscale/hcloudscale/cloudinit"
)

// templateError prefixes the errors of a cloud-init template that does
// not parse, one per problem.
func templateError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("template: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
}

// CloudInitValues returns what a pool's cloud-init template is rendered
// with for one server.
func CloudInitValues(pool *Pool, cluster, server string, arch Arch) cloudinit.Values {
	return cloudinit.Values{
		Pool: pool.Name, Server: server, Cluster: cluster,
		Location: pool.Location, ServerType: pool.ServerType, Arch: string(arch),
		Labels: pool.Labels, Taints: pool.Taints,
	}
}

// SampleServerName is a server name of the pool as long as any it gets,
// for renderings that check a template.
func SampleServerName(pool string) string {
	return pool + "-" + strings.Repeat("f", 16)
}

// CheckRendering renders a pool's cloud-init template for both
// architectures (the server type's is known only from the API) with a
// server name of the greatest length, and checks that it renders and that
// the largest rendering fits the user-data limit. The rendering itself is
// never part of the error.
func CheckRendering(pool *Pool, cluster string) error {
	t, err := cloudinit.Parse(pool.CloudInit.Reveal())
	if err != nil {
		return templateError(err)
	}
	largest := 0
	var failed []string // per architecture; most failures do not depend on it
	var errs []error
	for _, arch := range []Arch{ArchAMD64, ArchARM64} {
		out, err := t.Render(CloudInitValues(pool, cluster, SampleServerName(pool.Name), arch))
		if err != nil {
			failed = append(failed, err.Error())
			errs = append(errs, fmt.Errorf("template (rendered for %s): %w", arch, err))
			continue
		}
		largest = max(largest, len(out))
	}
	if len(failed) == 2 && failed[0] == failed[1] {
		errs = []error{fmt.Errorf("template: %s", failed[0])}
	}
	if largest > MaxCloudInitBytes {
		errs = append(errs, fmt.Errorf("rendered cloud-init is up to %d bytes, Hetzner accepts at most %d", largest, MaxCloudInitBytes))
	}
	return errors.Join(errs...)
}

// NodeLabelWarnings names the pools whose labels or taints the nodes will
// not carry: the autoscaler's template node promises them, the real node
// lacks them, and the autoscaler's simulation and the scheduler disagree.
// A pool is fine when its cloud-init is a template that prints them (see
// package cloudinit) or when the node labeller runs (labeller true); a
// template cannot give the kubelet labels that NodeRestriction forbids
// it (cloudinit.KubeletMaySet), so those need the labeller either way.
func NodeLabelWarnings(cfg *Config, labeller bool) []string {
	if labeller {
		return nil
	}
	const fix = "make its cloudInit a template that prints them (cloudInitTemplate; .KubeletFlags, .K3sFlags, .KubeadmKubeletExtraArgs and .KubeadmTaints, .TalosNodeLabels and .TalosNodeTaints) or run the node labeller (serve --label-nodes)"
	var out []string
	for i := range cfg.Pools {
		pool := &cfg.Pools[i]
		path := childPath("nodeConfigs", pool.Name)
		var t *cloudinit.Template
		if pool.CloudInitTemplate {
			t, _ = cloudinit.Parse(pool.CloudInit.Reveal())
		}
		if len(pool.Labels) > 0 && (t == nil || !t.PrintsLabels()) {
			out = append(out, fmt.Sprintf("%s.labels: the pool's nodes will not have these labels, which the autoscaler assumes they have: %s", path, fix))
		} else if len(pool.Labels) > 0 {
			var restricted []string
			for _, k := range sortedKeys(pool.Labels) {
				if !cloudinit.KubeletMaySet(k) {
					restricted = append(restricted, k)
				}
			}
			if len(restricted) > 0 {
				out = append(out, fmt.Sprintf("%s.labels: the kubelet may not set %s (NodeRestriction), so the template leaves them out: run the node labeller (serve --label-nodes)",
					path, strings.Join(restricted, ", ")))
			}
		}
		if len(pool.Taints) > 0 && (t == nil || !t.PrintsTaints()) {
			out = append(out, fmt.Sprintf("%s.taints: the pool's nodes will not have these taints, which the autoscaler assumes they have: %s", path, fix))
		}
	}
	return out
}
