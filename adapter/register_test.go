package adapter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider/builder"
	coreoptions "sigs.k8s.io/cluster-autoscaler/pkg/core/options"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestNewErrors checks that the constructor behind the builder returns
// every problem at once, each naming its setting, instead of exiting.
func TestNewErrors(t *testing.T) {
	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	noToken := func(extra map[string]string) config.Env {
		env := testEnv(t, fake, extra)
		lookup := env.Lookup
		env.Lookup = func(name string) (string, bool) {
			if name == config.EnvToken {
				return "", false
			}
			return lookup(name)
		}
		return env
	}
	tests := []struct {
		name      string
		env       config.Env
		discovery cloudprovider.NodeGroupDiscoveryOptions
		want      []string // each must appear in the error
	}{
		{"no token", noToken(nil), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
			[]string{"HCLOUD_TOKEN"}},
		{"bad --nodes spec", testEnv(t, fake, nil),
			cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: []string{"0:5:cpx21:fsn1:workers", "1:x:cx23:nbg1:batch"}},
			[]string{"--nodes[1] (batch)"}},
		{"no --nodes", testEnv(t, fake, nil), cloudprovider.NodeGroupDiscoveryOptions{},
			[]string{"--nodes"}},
		{"auto-discovery", testEnv(t, fake, nil),
			cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs, NodeGroupAutoDiscoverySpecs: []string{"label:a=b"}},
			[]string{"--node-group-auto-discovery"}},
		{"everything at once", noToken(map[string]string{config.EnvPublicIPv4: "maybe"}),
			cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: []string{"0:5:cpx21"}, NodeGroupAutoDiscoverySpecs: []string{"x"}},
			[]string{"HCLOUD_TOKEN", "HCLOUD_PUBLIC_IPV4", "--nodes[0]", "--node-group-auto-discovery"}},
		{"firewall that does not exist", testEnv(t, fake, map[string]string{"HCLOUD_FIREWALL": "missing-fw,also-missing"}),
			cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
			[]string{"HCLOUD_FIREWALL[0]", "missing-fw", "HCLOUD_FIREWALL[1]", "also-missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(t.Context(), tt.discovery, WithEnv(tt.env), WithClusterOptions(clusterOptions(hcloudtest.NewManualClock(epoch))...))
			if err == nil {
				_ = p.Cleanup()
				t.Fatal("New succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestBuilderShim calls the builder that Register installs, with the
// autoscaler's arguments and the process environment: it exits with
// status 1 after logging each problem, and returns a working provider
// for a good configuration.
func TestBuilderShim(t *testing.T) {
	for _, v := range []string{config.EnvToken, config.EnvEndpoint, config.EnvClusterConfig, "HCLOUD_CLUSTER_CONFIG_FILE",
		"HCLOUD_CLOUD_INIT", "HCLOUD_TOKEN_FILE", "HCLOUD_NETWORK", "HCLOUD_FIREWALL", "HCLOUD_SSH_KEY", "HCLOUD_CLUSTER_NAME"} {
		t.Setenv(v, "")
	}

	t.Run("bad configuration", func(t *testing.T) {
		out := captureKlog(t, "0")
		var exits []int
		build := buildFunc("hcloudscale", func(code int) { exits = append(exits, code) })
		got := build(&coreoptions.AutoscalerOptions{}, cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: []string{"0:5:cpx21:fsn1"}}, nil, nil)
		if got != nil {
			t.Errorf("builder returned %v; want nil after exit", got)
		}
		if !slices.Equal(exits, []int{1}) {
			t.Errorf("exit codes = %v; want [1]", exits)
		}
		var errorLines []string
		for _, l := range out.lines() {
			if strings.HasPrefix(l, "E") {
				errorLines = append(errorLines, l)
			}
		}
		// One line per problem, then the summary.
		for _, w := range []string{"HCLOUD_TOKEN", "--nodes[0]", "exiting"} {
			if !slices.ContainsFunc(errorLines, func(l string) bool { return strings.Contains(l, w) }) {
				t.Errorf("no error line names %q; error lines:\n%s", w, strings.Join(errorLines, "\n"))
			}
		}
		if len(errorLines) < 3 {
			t.Errorf("error lines = %d; want one per problem and a summary:\n%s", len(errorLines), strings.Join(errorLines, "\n"))
		}
	})

	t.Run("good configuration", func(t *testing.T) {
		captureKlog(t, "0")
		fake := hcloudtest.NewServer()
		t.Cleanup(fake.Close)
		doc, err := json.Marshal(clusterConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(config.EnvToken, fake.Token())
		t.Setenv(config.EnvEndpoint, fake.URL())
		t.Setenv(config.EnvClusterConfig, base64.StdEncoding.EncodeToString(doc))
		rl := cloudprovider.NewResourceLimiter(nil, map[string]int64{"cpu": 64})
		build := buildFunc("hetzner", func(code int) { t.Errorf("exit(%d) for a good configuration", code) })
		got := build(&coreoptions.AutoscalerOptions{}, cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs}, rl, nil)
		if got == nil {
			t.Fatal("builder returned nil")
		}
		t.Cleanup(func() {
			if err := got.Cleanup(); err != nil {
				t.Errorf("Cleanup: %v", err)
			}
		})
		if got.Name() != "hetzner" || len(got.NodeGroups()) != 3 {
			t.Errorf("provider %q with %d node groups; want hetzner with 3", got.Name(), len(got.NodeGroups()))
		}
		if l, _ := got.GetResourceLimiter(); l != rl {
			t.Errorf("GetResourceLimiter() = %v; want the builder's limiter", l)
		}
	})
}

// registerRuns makes the name of each TestRegister run unique: the
// builder's table is process-wide and exits on a name registered twice.
var registerRuns atomic.Int64

// TestRegister checks that Register adds a builder under the name.
func TestRegister(t *testing.T) {
	name := fmt.Sprintf("hcloudscale-register-test-%d", registerRuns.Add(1))
	Register(name)
	if _, ok := builder.GetCloudProviderBuilder(name); !ok {
		t.Errorf("no builder registered under %s", name)
	}
	if !slices.Contains(builder.AvailableCloudProviders(), name) {
		t.Errorf("AvailableCloudProviders() = %v; want it to list %s", builder.AvailableCloudProviders(), name)
	}
}

// foreignCollector stands for the built-in Hetzner provider's
// hcloud_api_requests_total, a collector of another type with the same
// descriptor as hcloud-go's.
type foreignCollector struct{ desc *prometheus.Desc }

func (c foreignCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c foreignCollector) Collect(chan<- prometheus.Metric)    {}

// TestTolerantRegisterer checks that a Cluster starts on a registry where
// another part of the binary registered hcloud_api_* metrics first, which
// makes hcloud-go panic on the plain registry.
func TestTolerantRegisterer(t *testing.T) {
	newRegistry := func() *prometheus.Registry {
		reg := prometheus.NewRegistry()
		reg.MustRegister(foreignCollector{prometheus.NewDesc("hcloud_api_requests_total",
			"A counter for requests to the hcloud api per endpoint.", []string{"code", "method", "api_endpoint"}, nil)})
		return reg
	}
	// start builds a Cluster on reg and gathers reg before closing it
	// (Close unregisters the pools' metrics).
	start := func(t *testing.T, reg *prometheus.Registry, wrap func(*prometheus.Registry) prometheus.Registerer) (names []string, panicked any) {
		defer func() { panicked = recover() }()
		fake := hcloudtest.NewServer()
		t.Cleanup(fake.Close)
		cfg, err := config.Load(testEnv(t, fake, nil), nodeSpecs)
		if err != nil {
			t.Fatal(err)
		}
		c, err := hcloudscale.New(t.Context(), cfg, hcloudscale.WithRegisterer(wrap(reg)))
		if err != nil {
			t.Fatalf("hcloudscale.New: %v", err)
		}
		defer func() {
			if err := c.Close(t.Context()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			names = append(names, f.GetName())
		}
		return names, nil
	}

	plain := func(reg *prometheus.Registry) prometheus.Registerer { return reg }
	if _, p := start(t, newRegistry(), plain); p == nil {
		t.Error("plain registry with a conflicting collector: no panic; the test no longer shows what the wrapper prevents")
	}
	tolerant := func(reg *prometheus.Registry) prometheus.Registerer {
		return tolerantRegisterer{reg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	}
	names, p := start(t, newRegistry(), tolerant)
	if p != nil {
		t.Fatalf("tolerant registerer: panic %v", p)
	}
	if !slices.Contains(names, "hcloudscale_pool_max_size") {
		t.Errorf("gathered metrics %v; want hcloudscale_pool_max_size among them", names)
	}

	// A collector of the same type is reused as usual.
	r := tolerantRegisterer{prometheus.NewRegistry(), zap.NewNop()}
	opts := prometheus.CounterOpts{Name: "same_total", Help: "h"}
	if err := r.Register(prometheus.NewCounter(opts)); err != nil {
		t.Fatal(err)
	}
	var are prometheus.AlreadyRegisteredError
	if err := r.Register(prometheus.NewCounter(opts)); !errors.As(err, &are) {
		t.Errorf("second Register of the same collector type = %v; want AlreadyRegisteredError", err)
	}
}

// klogOutput collects what klog writes; klog writes from any goroutine.
type klogOutput struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (o *klogOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *klogOutput) lines() []string {
	klog.Flush()
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Split(strings.TrimSuffix(o.buf.String(), "\n"), "\n")
}

// captureKlog sends klog's output to a buffer at verbosity v until the
// test ends, one line per message.
func captureKlog(t *testing.T, v string) *klogOutput {
	t.Helper()
	state := klog.CaptureState()
	t.Cleanup(state.Restore)
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	for k, val := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "one_output": "true", "v": v} {
		if err := fs.Set(k, val); err != nil {
			t.Fatal(err)
		}
	}
	out := &klogOutput{}
	klog.SetOutput(out)
	return out
}
