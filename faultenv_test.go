package hcloudscale_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// faultEpoch is where the manual clocks of the fault tests start.
var faultEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// faultCloudInit is the user data of the fault tests' pools; it holds a
// join token, as real cloud-init does.
const faultCloudInit = "#cloud-config\nruncmd: [kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef]\n"

// faultNodes are the pools of the fault tests: "plain" starts its servers
// at create (network in the create request); "subnet" creates them
// stopped, attaches them with its subnet range and powers them on;
// "dedicated" is a third plain pool for the soak test.
var faultNodes = []string{
	"0:8:cpx21:fsn1:plain",
	"0:6:cax11:nbg1:subnet",
	"0:4:ccx13:hel1:dedicated",
}

func faultClusterConfig() clusterConfig {
	return clusterConfig{
		"clusterName":   "prod",
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"plain":     map[string]any{"cloudInit": faultCloudInit, "labels": map[string]string{"role": "worker"}},
			"subnet":    map[string]any{"cloudInit": faultCloudInit, "subnetIPRange": "10.1.0.0/16"},
			"dedicated": map[string]any{"cloudInit": faultCloudInit},
		},
	}
}

type faultOptions struct {
	// realClock runs the fake and the Cluster on the wall clock (with
	// short actions) instead of a manual clock; the rate limiter then
	// refills in real time, as the pacer expects.
	realClock bool
	fake      []hcloudtest.Option
	cluster   []hcloudscale.Option
	// nodes replaces faultNodes.
	nodes []string
	// settleWithin bounds the wall time settle waits (30 s when zero).
	settleWithin time.Duration
}

// faultEnv is a fake project and a Cluster over it.
type faultEnv struct {
	t            *testing.T
	p            *project
	clock        *hcloudtest.ManualClock // nil with realClock
	cfg          *config.Config
	c            *hcloudscale.Cluster
	opts         []hcloudscale.Option
	settleWithin time.Duration
	// killed holds the Clusters restart closed with a cancelled context.
	killed map[*hcloudscale.Cluster]bool
}

func newFaultEnv(t *testing.T, fo faultOptions) *faultEnv {
	t.Helper()
	e := &faultEnv{t: t, killed: map[*hcloudscale.Cluster]bool{}, settleWithin: 30 * time.Second}
	if fo.settleWithin > 0 {
		e.settleWithin = fo.settleWithin
	}
	var fakeOpts []hcloudtest.Option
	if fo.realClock {
		fakeOpts = append(fakeOpts, hcloudtest.WithDefaultActionDuration(20*time.Millisecond))
	} else {
		e.clock = hcloudtest.NewManualClock(faultEpoch)
		// The waiter polls every millisecond of wall time while the
		// manual clock stands still; a bucket refilled on that clock
		// would run dry.
		fakeOpts = append(fakeOpts, hcloudtest.WithClock(e.clock), hcloudtest.WithRateLimit(0, 0))
		e.opts = append(e.opts, hcloudscale.WithClock(hcloudtest.WallWaits(e.clock)))
	}
	e.p = newProject(t, append(fakeOpts, fo.fake...)...)
	nodes := faultNodes
	if fo.nodes != nil {
		nodes = fo.nodes
	}
	e.cfg = e.p.load(t, faultClusterConfig(), nil, nodes)
	// Debug would log every API body; info shows the pools' decisions.
	e.opts = append(e.opts, fastClient(), hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))))
	e.opts = append(e.opts, fo.cluster...)
	e.c = e.start()
	return e
}

// start builds a Cluster over the project; the test's cleanup closes it
// unless restart killed it.
func (e *faultEnv) start() *hcloudscale.Cluster {
	e.t.Helper()
	c, err := hcloudscale.New(context.Background(), e.cfg, e.opts...)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.t.Cleanup(func() {
		if e.killed[c] {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.t.Errorf("Close: %v", err)
		}
	})
	return c
}

// stop closes the Cluster, giving in-flight work 5 s (a flow waiting for
// an action of a manual clock that no longer moves would wait forever),
// and the fake. Tests that check for leaking goroutines defer it.
func (e *faultEnv) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.c.Close(ctx); err != nil {
		// A test that got this far without closing has failed already
		// (or expects to, for a known bug); this is a consequence.
		e.t.Logf("Close: %v", err)
		e.killed[e.c] = true
	}
	e.api().Close()
}

func (e *faultEnv) api() *hcloudtest.Server { return e.p.api }

// restart closes the Cluster as a killed process would leave it (its
// context already cancelled, so in-flight flows stop where they are) and
// starts a new one over the same project.
func (e *faultEnv) restart() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = e.c.Close(ctx) // a cancelled Close reports the flows it stopped
	e.killed[e.c] = true
	e.c = e.start()
}

// settled reports whether nothing is in flight: every instance runs or
// is a failure the autoscaler has to act on, no claim is pending, and the
// API has no server of ours in a transition.
func settled(c *hcloudscale.Cluster, api *hcloudtest.Server) bool {
	for _, p := range c.Pools() {
		st := p.Status()
		if st.PendingClaims != 0 {
			return false
		}
		for _, in := range p.Instances() {
			ok := (in.State == pool.Running && in.Error == nil) || (in.State == pool.Creating && in.Error != nil)
			if !ok {
				return false
			}
		}
	}
	servers, err := api.Servers(config.LabelNodeGroup)
	if err != nil {
		return false
	}
	for _, s := range servers {
		switch s.Status {
		case hcloud.ServerStatusInitializing, hcloud.ServerStatusStarting, hcloud.ServerStatusDeleting:
			return false
		}
	}
	return true
}

// settle waits until the Cluster has settled, calling Refresh as the
// autoscaler's loop does and advancing the manual clock: by 100 ms per
// millisecond of wall time for the first 5 s of wall time (actions finish,
// waits and the pools' wall-clock retry backoffs end), then by 10 s
// (creation timeouts pass), for at most 30 minutes of the manual clock and
// 30 s of wall time (faultOptions.settleWithin). The fault matrix sets a listing TTL of an hour, so
// that no listing repairs what the Cluster got wrong.
func (e *faultEnv) settle() error {
	start := time.Now()
	var simulated time.Duration
	for {
		if err := e.c.Refresh(context.Background()); err != nil {
			e.t.Logf("Refresh: %v", err)
		}
		if settled(e.c, e.api()) {
			return nil
		}
		if time.Since(start) > e.settleWithin || simulated > 30*time.Minute {
			return fmt.Errorf("the cluster did not settle within %s of its clock (%s of wall time):\n%v",
				simulated, time.Since(start).Round(time.Millisecond), observe(e.t, e.c, e.api()))
		}
		if e.clock != nil {
			step := 100 * time.Millisecond
			if time.Since(start) > 5*time.Second {
				step = 10 * time.Second
			}
			e.clock.Advance(step)
			simulated += step
		}
		time.Sleep(time.Millisecond)
	}
}

// waitFor polls cond in wall-clock time without moving the manual clock.
func (e *faultEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ids returns the IDs of the pool's instances.
func ids(p *pool.Pool) []string {
	var out []string
	for _, in := range p.Instances() {
		out = append(out, in.ID)
	}
	return out
}

// poolServers returns the API's servers of one pool of the cluster.
func poolServers(t testing.TB, api *hcloudtest.Server, poolName string) []hcloudtest.ServerInfo {
	t.Helper()
	servers, err := api.Servers(config.LabelNodeGroup + "=" + poolName + "," + config.LabelCluster + "=prod")
	if err != nil {
		t.Fatal(err)
	}
	return servers
}
