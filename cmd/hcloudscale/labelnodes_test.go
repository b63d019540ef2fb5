package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
