package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestServeLabelNodesNeedsPermission: serve --label-nodes stops at start
// when it may not list nodes, naming the flag; the kubeconfig it was given
// is the API it asks.
func TestServeLabelNodesNeedsPermission(t *testing.T) {
	var asked []string
	k8s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
			`"message":"nodes is forbidden: User \"system:serviceaccount:kube-system:hcloudscale\" cannot list resource \"nodes\""}`))
	}))
	t.Cleanup(k8s.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+k8s.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}

	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	doc, _ := json.Marshal(map[string]any{"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n"}}})
	env := config.MapEnv(map[string]string{
		config.EnvToken: fake.Token(), config.EnvEndpoint: fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil)
	var stderr strings.Builder
	code := runServe(t.Context(), []string{"--nodes", "0:3:cx23:fsn1:workers", "--listen", "127.0.0.1:0", "--metrics-listen", "",
		"--label-nodes", "--kubeconfig", kubeconfig}, &strings.Builder{}, &stderr, env)
	if code != exitFailure {
		t.Fatalf("runServe = %d; want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	for _, want := range []string{"--label-nodes: listing nodes", "cannot list resource"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if len(asked) == 0 || asked[0] != "GET /api/v1/nodes" {
		t.Errorf("requests to the Kubernetes API = %q; want GET /api/v1/nodes", asked)
	}
}

// TestValidateLabelsAndTemplates: validate reports every bad template as a
// problem of its pool, and warns about labels and taints the nodes will
// not get unless --label-nodes says the labeller runs.
func TestValidateLabelsAndTemplates(t *testing.T) {
	p := newFakeProject(t)
	doc := `{"nodeConfigs": {
	  "plain": {"cloudInit": "#cloud-config\n", "labels": {"a": "b"}},
	  "tmpl": {"cloudInitTemplate": true, "cloudInit": "<% .KubeletFlags %>", "labels": {"a": "b"}, "taints": [{"key": "k", "effect": "NoSchedule"}]}
	}}`
	env := p.env(t, map[string]string{config.EnvClusterConfigFile: "", config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(doc))})
	nodes := []string{"--nodes=0:1:cx23:fsn1:plain", "--nodes=0:1:cx23:fsn1:tmpl"}
	for _, labeller := range []bool{false, true} {
		args := append([]string{"--output=json"}, nodes...)
		if labeller {
			args = append(args, "--label-nodes")
		}
		r := runCmd(t, runValidate, env, args...)
		res := decodeJSON[validateResult](t, r)
		if r.code != exitOK || !res.Valid {
			t.Fatalf("validate %q = %d, problems %v; want valid", args, r.code, res.Problems)
		}
		var warned []string
		for _, w := range res.Warnings {
			if strings.Contains(w, "labeller") {
				warned = append(warned, w[:strings.Index(w, ":")])
			}
		}
		var want []string
		if !labeller {
			want = []string{"nodeConfigs.plain.labels"}
		}
		if !slices.Equal(want, warned) {
			t.Errorf("validate %q warns about %q; want %q", args, warned, want)
		}
	}

	bad := `{"nodeConfigs": {
	  "a": {"cloudInitTemplate": true, "cloudInit": "token\n<% .Nope %>"},
	  "b": {"cloudInitTemplate": true, "cloudInit": "<% if %>"}
	}}`
	env = p.env(t, map[string]string{config.EnvClusterConfigFile: "", config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(bad))})
	r := runCmd(t, runValidate, env, "--output=json", "--nodes=0:1:cx23:fsn1:a", "--nodes=0:1:cx23:fsn1:b")
	res := decodeJSON[validateResult](t, r)
	var got []string
	for _, pr := range res.Problems {
		got = append(got, pr.Setting)
	}
	if r.code != exitFailure || !slices.Equal(got, []string{"nodeConfigs.a.cloudInit", "nodeConfigs.b.cloudInit"}) {
		t.Errorf("validate with two bad templates = %d, problems %v; want 1 and both pools named", r.code, res.Problems)
	}
}
