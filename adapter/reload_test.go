package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// writeAtomically replaces path's content with one rename, as an editor
// or a ConfigMap update does.
func writeAtomically(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func groupSizes(p *Provider) []string {
	var out []string
	for _, g := range p.NodeGroups() {
		out = append(out, g.Id()+" "+strconv.Itoa(g.MinSize())+".."+strconv.Itoa(g.MaxSize()))
	}
	return out
}

// TestProviderKeepsAFlagPoolTheFileDrops: a --nodes pool needs its
// nodeConfigs entry, so a file without it does not load and the running
// configuration stays.
func TestProviderKeepsAFlagPoolTheFileDrops(t *testing.T) {
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	path := filepath.Join(t.TempDir(), "cluster-config.json")
	write := func(cc map[string]any) {
		data, err := json.Marshal(cc)
		if err != nil {
			t.Fatal(err)
		}
		writeAtomically(t, path, data)
	}
	write(clusterConfig())
	vars := map[string]string{config.EnvToken: fake.Token(), config.EnvEndpoint: fake.URL(), config.EnvClusterConfigFile: path}
	fileEnv := config.Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, ReadFile: os.ReadFile}
	p, err := New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
		WithEnv(fileEnv), WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		WithClusterOptions(append(clusterOptions(clock), hcloudscale.WithReloadInterval(time.Second))...))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &env{t: t, fake: fake, clock: clock, provider: p}
	t.Cleanup(e.cleanup)

	cc := clusterConfig()
	delete(cc["nodeConfigs"].(map[string]any), "arm")
	write(cc)
	clock.Advance(2 * time.Second)
	if err := p.Refresh(); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := groupSizes(p); !slices.Equal(got, []string{"workers 0..5", "batch 0..3", "arm 1..3"}) {
		t.Errorf("node groups = %v; want those of --nodes, unchanged", got)
	}
	st := p.Cluster().ReloadStatus()
	if st.Current || st.Err == nil || !strings.Contains(st.Err.Error(), "nodeConfigs.arm: missing") {
		t.Errorf("status = %+v; want the missing entry of arm", st)
	}
}

// TestProviderReloadsPoolsOfTheFile runs a Provider whose pools are all
// in the cluster config file: adding, resizing and removing one needs no
// restart.
func TestProviderReloadsPoolsOfTheFile(t *testing.T) {
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	armID, err := fake.AddServer(armServer("arm-0000000000000001"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster-config.json")
	declared := func() map[string]any {
		cc := clusterConfig()
		nodes := cc["nodeConfigs"].(map[string]any)
		for name, spec := range map[string][3]any{"workers": {"cpx21", "fsn1", 5}, "batch": {"cx23", "nbg1", 3}, "arm": {"cax11", "hel1", 3}} {
			n := nodes[name].(map[string]any)
			n["serverType"], n["location"], n["maxSize"] = spec[0], spec[1], spec[2]
		}
		return cc
	}
	write := func(cc map[string]any) {
		data, err := json.Marshal(cc)
		if err != nil {
			t.Fatal(err)
		}
		writeAtomically(t, path, data)
	}
	write(declared())
	vars := map[string]string{config.EnvToken: fake.Token(), config.EnvEndpoint: fake.URL(), config.EnvClusterConfigFile: path}
	fileEnv := config.Env{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, ReadFile: os.ReadFile}
	p, err := New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{},
		WithEnv(fileEnv), WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		WithClusterOptions(append(clusterOptions(clock), hcloudscale.WithReloadInterval(time.Second))...))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &env{t: t, fake: fake, clock: clock, provider: p}
	t.Cleanup(e.cleanup)
	refresh := func() {
		t.Helper()
		clock.Advance(2 * time.Second)
		if err := p.Refresh(); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
	}
	refresh()
	if got := groupSizes(p); !slices.Equal(got, []string{"arm 0..3", "batch 0..3", "workers 0..5"}) {
		t.Errorf("node groups at start = %v", got)
	}
	armNode := node(hcloudtest.ServerInfo{ID: armID, Name: "arm-0000000000000001"})
	before, err := p.NodeGroupForNode(armNode)
	if err != nil || before == nil {
		t.Fatalf("NodeGroupForNode(arm server) = %v, %v", before, err)
	}

	cc := declared()
	nodes := cc["nodeConfigs"].(map[string]any)
	delete(nodes, "arm")
	nodes["extra"] = map[string]any{"serverType": "cx33", "location": "nbg1", "maxSize": 2}
	nodes["batch"].(map[string]any)["maxSize"] = 6
	write(cc)
	refresh()
	if got := groupSizes(p); !slices.Equal(got, []string{"batch 0..6", "extra 0..2", "workers 0..5", "arm 0..0"}) {
		t.Errorf("node groups after the change = %v", got)
	}
	after, err := p.NodeGroupForNode(armNode)
	if err != nil || after != before {
		t.Errorf("NodeGroupForNode(arm server) after its pool left = %v, %v; want the same node group", after, err)
	}
	if err := after.IncreaseSize(1); err == nil {
		t.Error("IncreaseSize of the removed pool = nil; want an error")
	}
	if err := e.group("extra").IncreaseSize(1); err != nil {
		t.Errorf("IncreaseSize of the added pool: %v", err)
	}

	// A broken file changes nothing, and Refresh does not fail for it.
	writeAtomically(t, path, []byte(`{"nodeConfigs": {`))
	refresh()
	if got := groupSizes(p); !slices.Equal(got, []string{"batch 0..6", "extra 0..2", "workers 0..5", "arm 0..0"}) {
		t.Errorf("node groups with a broken file = %v", got)
	}
	if st := p.Cluster().ReloadStatus(); st.Current || st.Err == nil {
		t.Errorf("status with a broken file = %+v; want not current, with the error", st)
	}
	e.eventually("the added pool's server", 100*time.Millisecond, func() bool { return len(e.servers("extra")) == 1 && e.targetSize(e.group("extra")) == 1 })
}
