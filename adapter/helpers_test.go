package adapter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestMain(m *testing.M) {
	// klog flushes its buffers from a goroutine it starts at init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// epoch is where every manual clock starts.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const clusterName = "e2e"

// The pools of every test: workers has labels and a taint and sets no
// autoscaling options, batch sets some, arm has a min size of 1 and one
// server from the start.
var nodeSpecs = []string{
	"0:5:cpx21:fsn1:workers",
	"0:3:cx23:nbg1:batch",
	"1:3:cax11:hel1:arm",
}

func clusterConfig() map[string]any {
	return map[string]any{
		"clusterName":   clusterName,
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers": map[string]any{
				"cloudInit": "#cloud-config\n",
				"labels":    map[string]string{"role": "worker"},
				"taints":    []map[string]string{{"key": "dedicated", "value": "workers", "effect": "NoSchedule"}},
			},
			"batch": map[string]any{
				"cloudInit": "#cloud-config\n",
				"autoscaling": map[string]any{
					"scaleDownUtilizationThreshold": 0.7,
					"scaleDownUnneededTime":         "20m",
					"ignoreDaemonSetsUtilization":   true,
				},
			},
			"arm": map[string]any{"cloudInit": "#cloud-config\n"},
		},
	}
}

// env is a fake Hetzner project and a Provider over it, built the way the
// builder shim builds it (New with discovery options), with a manual
// clock and short poll and retry backoffs.
type env struct {
	t        *testing.T
	fake     *hcloudtest.Server
	clock    *hcloudtest.ManualClock
	provider *Provider
	limiter  *cloudprovider.ResourceLimiter
	// armServer is the ID of the arm pool's server; controlPlane the ID
	// of a server of no pool.
	armServer, controlPlane int64
}

// testEnv returns the variables that point config.Load at fake.
func testEnv(t *testing.T, fake *hcloudtest.Server, extra map[string]string) config.Env {
	t.Helper()
	doc, err := json.Marshal(clusterConfig())
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		config.EnvToken:         fake.Token(),
		config.EnvEndpoint:      fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}
	for k, v := range extra {
		vars[k] = v
	}
	return config.MapEnv(vars, nil)
}

// clusterOptions are the Cluster options of every test environment.
func clusterOptions(clock hcloudtest.Clock) []hcloudscale.Option {
	return []hcloudscale.Option{
		hcloudscale.WithClock(hcloudtest.WallWaits(clock)),
		hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithRegisterer(prometheus.NewRegistry()),
		hcloudscale.WithClientOptions(
			hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
			hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
		),
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	e := &env{t: t, fake: fake, clock: clock,
		limiter: cloudprovider.NewResourceLimiter(map[string]int64{"cpu": 1}, map[string]int64{"cpu": 100})}

	var err error
	e.armServer, err = fake.AddServer(armServer("arm-0000000000000001"))
	if err != nil {
		t.Fatal(err)
	}
	e.controlPlane, err = fake.AddServer(hcloudtest.ServerInfo{Name: "control-plane-1", ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning})
	if err != nil {
		t.Fatal(err)
	}

	e.provider, err = New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
		WithEnv(testEnv(t, fake, nil)),
		WithResourceLimiter(e.limiter),
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		WithClusterOptions(clusterOptions(clock)...),
	)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.cleanup() })
	return e
}

// cleanup calls Cleanup while moving the fake's clock: creates in flight
// reach a safe point only as it moves.
func (e *env) cleanup() {
	e.t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.provider.Cleanup() }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Cleanup: %v", err)
			}
			return
		case <-deadline:
			e.t.Fatal("Cleanup did not return within 10 s")
		case <-time.After(time.Millisecond):
			e.clock.Advance(100 * time.Millisecond)
		}
	}
}

// armServer is a running server of the arm pool.
func armServer(name string) hcloudtest.ServerInfo {
	return hcloudtest.ServerInfo{Name: name, ServerType: "cax11", Location: "hel1", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "arm", config.LabelCluster: clusterName}}
}

// group returns the node group with that id.
func (e *env) group(id string) cloudprovider.NodeGroup {
	e.t.Helper()
	for _, g := range e.provider.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	e.t.Fatalf("no node group %q", id)
	return nil
}

// eventually polls cond in wall-clock time, advancing the fake's clock by
// step before each poll (0: not at all), and fails after 10 s.
func (e *env) eventually(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		if step > 0 {
			e.clock.Advance(step)
		}
		time.Sleep(time.Millisecond)
	}
}

// nodes calls Nodes.
func (e *env) nodes(g cloudprovider.NodeGroup) []cloudprovider.Instance {
	e.t.Helper()
	in, err := g.Nodes()
	if err != nil {
		e.t.Fatalf("%s.Nodes: %v", g.Id(), err)
	}
	return in
}

// targetSize calls TargetSize.
func (e *env) targetSize(g cloudprovider.NodeGroup) int {
	e.t.Helper()
	n, err := g.TargetSize()
	if err != nil {
		e.t.Fatalf("%s.TargetSize: %v", g.Id(), err)
	}
	return n
}

// servers returns the fake's servers of a pool.
func (e *env) servers(pool string) []hcloudtest.ServerInfo {
	e.t.Helper()
	out, err := e.fake.Servers(config.LabelNodeGroup + "=" + pool)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// states counts instances by state and, for failed ones, error class:
// "creating", "running", "creating/OutOfResource".
func states(in []cloudprovider.Instance) map[string]int {
	out := map[string]int{}
	for _, i := range in {
		k := "none"
		if i.Status != nil {
			k = map[cloudprovider.InstanceState]string{
				cloudprovider.InstanceRunning:  "running",
				cloudprovider.InstanceCreating: "creating",
				cloudprovider.InstanceDeleting: "deleting",
			}[i.Status.State]
			if i.Status.ErrorInfo != nil {
				k += "/" + i.Status.ErrorInfo.ErrorClass.String()
			}
		}
		out[k]++
	}
	return out
}

// node is a Kubernetes node of a server, as the cloud controller manager
// registers it.
func node(s hcloudtest.ServerInfo) *apiv1.Node {
	return &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec:       apiv1.NodeSpec{ProviderID: providerID(s.ID)},
	}
}

func providerID(id int64) string { return "hcloud://" + strconv.FormatInt(id, 10) }

// ctx is a test context with the autoscaler's patience.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}
