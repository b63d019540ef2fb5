package main

import (
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestValidatePlaceholders: the example's __BOOTSTRAP_TOKEN__-style
// placeholders, left in a pool's cloud-init, are a warning naming the pool
// and the placeholders (a problem with --strict); a cloud-init without
// them is not, and the cloud-init itself is never printed.
func TestValidatePlaceholders(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	env := p.env(t, nil)
	r := runCmd(t, runValidate, env, append([]string{"--output=json"}, exampleNodes...)...)
	res := decodeJSON[validateResult](t, r)
	var found []string
	for _, w := range res.Warnings {
		if strings.Contains(w, "placeholders") {
			found = append(found, w)
		}
	}
	if len(found) == 0 || !strings.Contains(found[0], "__BOOTSTRAP_TOKEN__") || !strings.Contains(found[0], "__API_SERVER_ENDPOINT__") ||
		!strings.HasPrefix(found[0], "nodeConfigs.workers.cloudInit: ") {
		t.Errorf("warnings %q; want one naming nodeConfigs.workers.cloudInit and its placeholders", res.Warnings)
	}
	if strings.Contains(r.stdout, "kubeadm join") {
		t.Errorf("validate printed the cloud-init:\n%s", r.stdout)
	}
	if r := runCmd(t, runValidate, env, append([]string{"--strict"}, exampleNodes...)...); r.code != exitFailure || !strings.Contains(r.stdout, "__BOOTSTRAP_TOKEN__") {
		t.Errorf("validate --strict: exit %d; want %d with the placeholders as a problem; output:\n%s", r.code, exitFailure, r.stdout)
	}

	filled := strings.NewReplacer("__API_SERVER_ENDPOINT__", "10.0.0.2:6443", "__BOOTSTRAP_TOKEN__", "abcdef.0123456789abcdef",
		"__CA_CERT_HASH__", "sha256:00", "__K3S_URL__", "https://10.0.0.2:6443", "__K3S_TOKEN__", "K10secret").Replace(readExampleConfig(t))
	env = config.MapEnv(map[string]string{config.EnvToken: p.api.Token(), config.EnvEndpoint: p.api.URL(), config.EnvNetwork: "k8s",
		config.EnvFirewall: "nodes", config.EnvSSHKey: "ops", config.EnvClusterConfigFile: exampleConfigPath}, map[string]string{exampleConfigPath: filled})
	res = decodeJSON[validateResult](t, runCmd(t, runValidate, env, append([]string{"--output=json"}, exampleNodes...)...))
	for _, w := range res.Warnings {
		if strings.Contains(w, "placeholders") {
			t.Errorf("filled cloud-init: warning %q", w)
		}
	}
}
