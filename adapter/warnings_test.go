package adapter

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestWarningsLoggedOnce starts a provider with a configuration warning, a
// start-up check warning (a deprecated server type) and label warnings (pool
// labels and taints without the node labeller): each is logged exactly
// once, at warning level.
func TestWarningsLoggedOnce(t *testing.T) {
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	if err := fake.DeprecateServerType("cx23", "nbg1", epoch.Add(-time.Hour), epoch.AddDate(1, 0, 0)); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.DebugLevel)
	p, err := New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
		WithEnv(testEnv(t, fake, map[string]string{config.EnvServerCreationTimeout: "0"})),
		WithLogger(zap.New(core)),
		WithClusterOptions(clusterOptions(clock)...),
	)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Cleanup(); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})

	seen := map[string]int{}
	for _, e := range logs.FilterLevelExact(zapcore.WarnLevel).All() {
		seen[e.Message]++
	}
	for msg, n := range seen {
		if n != 1 {
			t.Errorf("warning logged %d times; want once: %s", n, msg)
		}
	}
	for _, want := range []string{
		config.EnvServerCreationTimeout + ": 0 means the default", // configuration
		`server type "cx23" is deprecated`,                        // start-up check
		"nodeConfigs.workers.taints",                              // the taint no one applies
	} {
		found := false
		for msg := range seen {
			found = found || strings.Contains(msg, want)
		}
		if !found {
			t.Errorf("no warning mentions %q; warnings: %v", want, seen)
		}
	}
}
