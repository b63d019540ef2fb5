package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// exampleNodes are the --nodes flags that go with
// examples/cluster-config.json, as examples/README.md shows them.
var exampleNodes = []string{
	"--nodes=0:10:cpx31:fsn1:workers",
	"--nodes=0:5:cax21:nbg1:arm-batch",
	"--nodes=0:5:cax21:hel1:arm-batch-hel1",
}

// exampleConfigPath is where the tests' environments find the example
// cluster config.
const exampleConfigPath = "/etc/hcloudscale/cluster-config.json"

func readExampleConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/cluster-config.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeProject is a fake Hetzner project with everything the example
// config refers to.
type fakeProject struct {
	api *hcloudtest.Server
	// armSnapshot is the image the arm-batch pools' label selector picks.
	armSnapshot int64
	// spread is the workers pool's placement group.
	spread int64
}

func newFakeProject(t *testing.T, opts ...hcloudtest.Option) *fakeProject {
	t.Helper()
	api := hcloudtest.NewServer(opts...)
	t.Cleanup(api.Close)
	must := func(id int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	must(api.AddNetwork(hcloudtest.Network{Name: "k8s", IPRange: "10.0.0.0/8", Subnets: []hcloudtest.Subnet{
		{IPRange: "10.0.0.0/16"}, {IPRange: "10.1.0.0/16"},
	}}))
	for _, fw := range []string{"nodes", "workers", "batch"} {
		must(api.AddFirewall(hcloudtest.Firewall{Name: fw}))
	}
	must(api.AddSSHKey(hcloudtest.SSHKey{Name: "ops"}))
	spread := must(api.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "workers-spread"}))
	snap := must(api.AddSnapshot("k8s node v1.35 arm64", hcloud.ArchitectureARM, map[string]string{"k8s-node": "true", "kubernetes": "v1.35"}))
	return &fakeProject{api: api, armSnapshot: snap, spread: spread}
}

// env is the environment of the example configuration against this
// project. extra adds variables; an empty value removes one.
func (p *fakeProject) env(t *testing.T, extra map[string]string) config.Env {
	t.Helper()
	vars := map[string]string{
		config.EnvToken:             p.api.Token(),
		config.EnvEndpoint:          p.api.URL(),
		config.EnvNetwork:           "k8s",
		config.EnvFirewall:          "nodes",
		config.EnvSSHKey:            "ops",
		config.EnvClusterConfigFile: exampleConfigPath,
	}
	for k, v := range extra {
		if v == "" {
			delete(vars, k)
		} else {
			vars[k] = v
		}
	}
	return config.MapEnv(vars, map[string]string{exampleConfigPath: readExampleConfig(t)})
}

// ran is what one in-process run of a subcommand produced.
type ran struct {
	code           int
	stdout, stderr string
}

type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int

func runCmd(t *testing.T, cmd subcommand, env config.Env, args ...string) ran {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cmd(t.Context(), args, &stdout, &stderr, env)
	return ran{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// decodeJSON decodes a run's stdout strictly into a value of type T.
func decodeJSON[T any](t *testing.T, r ran) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return v
}
