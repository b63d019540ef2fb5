package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// writeConfigMap writes content as the kubelet updates a ConfigMap
// volume: into a new directory, then a swap of the ..data symlink that
// dir/cluster-config.json points through.
func writeConfigMap(t *testing.T, dir string, gen int, content string) {
	t.Helper()
	d := filepath.Join(dir, "..gen"+strconv.Itoa(gen))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "cluster-config.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(d), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if gen == 1 {
		if err := os.Symlink(filepath.Join("..data", "cluster-config.json"), filepath.Join(dir, "cluster-config.json")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeReloadsTheClusterConfigFile runs serve with its pools in a
// ConfigMap-mounted file only, and changes the file under it.
func TestServeReloadsTheClusterConfigFile(t *testing.T) {
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	writeConfigMap(t, dir, 1, `{"nodeConfigs": {"workers": {"serverType": "cx23", "location": "fsn1", "maxSize": 3}}}`)
	vars := map[string]string{
		config.EnvToken:             fake.Token(),
		config.EnvEndpoint:          fake.URL(),
		config.EnvClusterConfigFile: filepath.Join(dir, "cluster-config.json"),
	}
	env := config.Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, ReadFile: os.ReadFile}
	args := []string{"--listen", "127.0.0.1:0", "--health-listen", "", "--metrics-listen", "127.0.0.1:0", "--shutdown-timeout", "5s"}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- runServe(ctx, args, io.Discard, stderr, env) }()
	serving := waitForLog(t, stderr, exited, "serving")
	conn, err := grpc.NewClient(serving["listen"].(string), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	provider := protos.NewCloudProviderClient(conn)
	call := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		t.Cleanup(cancel)
		return c
	}
	// groups refreshes, as the autoscaler does at the start of a loop,
	// and lists the node groups.
	groups := func() []string {
		t.Helper()
		if _, err := provider.Refresh(call(), &protos.RefreshRequest{}); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		res, err := provider.NodeGroups(call(), &protos.NodeGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range res.GetNodeGroups() {
			out = append(out, g.GetId()+" max "+strconv.Itoa(int(g.GetMaxSize())))
		}
		return out
	}
	metrics := func() string { return get(t, "http://"+serving["metrics_listen"].(string)+"/metrics") }

	if got := groups(); !slices.Equal(got, []string{"workers max 3"}) {
		t.Errorf("node groups at start = %v", got)
	}
	writeConfigMap(t, dir, 2, `{"nodeConfigs": {"workers": {"serverType": "cx23", "location": "fsn1", "maxSize": 5}, "extra": {"serverType": "cx33", "location": "nbg1", "maxSize": 2}}}`)
	// The file is read at most every few seconds.
	deadline := time.Now().Add(20 * time.Second)
	want := []string{"extra max 2", "workers max 5"} // pools of the file alone come by name
	for got := groups(); !slices.Equal(got, want); got = groups() {
		if time.Now().After(deadline) {
			t.Fatalf("node groups after the update = %v; want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if m := metrics(); !strings.Contains(m, "hcloudscale_config_reload_success 1") {
		t.Errorf("metrics lack hcloudscale_config_reload_success 1")
	}
	metricsURL := "http://" + serving["metrics_listen"].(string) + "/metrics"
	status := func() (int, string) {
		var out strings.Builder
		code := runStatus(t.Context(), []string{"--serve-metrics", metricsURL}, &out, &out, env)
		return code, out.String()
	}
	if code, out := status(); code != exitOK || !strings.Contains(out, "serve runs it") {
		t.Errorf("status = %d:\n%s\nwant that serve runs the file", code, out)
	}

	// A broken file: the autoscaler's calls go on with the last good
	// configuration, and the metric says the file is not running.
	writeConfigMap(t, dir, 3, `{"nodeConfigs": {"workers": {"serverType": "cx23", "location": "fsn1", "maxSize": 5}, "extra": {"serverType": "cx33", "loc`)
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(metrics(), "hcloudscale_config_reload_success 0") {
		if time.Now().After(deadline) {
			t.Fatal("hcloudscale_config_reload_success did not drop to 0 for a broken file")
		}
		if got := groups(); !slices.Equal(got, want) {
			t.Fatalf("node groups with a broken file = %v; want the last good %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := provider.NodeGroupIncreaseSize(call(), &protos.NodeGroupIncreaseSizeRequest{Id: "extra", Delta: 1}); err != nil {
		t.Errorf("scale-up with a broken file: %v", err)
	}
	if code, out := status(); code == exitOK || !strings.Contains(out, "NOT RUNNING") || !strings.Contains(out, "its last reload failed") {
		t.Errorf("status with a broken file = %d:\n%s\nwant that serve does not run it", code, out)
	}
	if n := strings.Count(stderr.String(), "configuration file does not load"); n != 1 {
		t.Errorf("the broken file was logged %d times; want once", n)
	}
	cancel()
	if code := <-exited; code != exitOK {
		t.Errorf("runServe = %d; stderr:\n%s", code, stderr.String())
	}
}
