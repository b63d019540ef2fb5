package pool

import (
	"context"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/servercache"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch is where every fake clock starts.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testCluster   = "test"
	testCloudInit = "#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]\n"
)

// env is one fake Hetzner project with the shared parts a Cluster would
// build: client, waiter, cache, catalogue and image resolver.
type env struct {
	t      *testing.T
	fake   *hcloudtest.Server
	clock  *testingclock.FakeClock
	client *hcloud.Client
	waiter *actionwait.Waiter
	cache  *servercache.Cache
	types  *servercache.TypeCatalog
	images *imageresolve.Resolver
	ticker *countingClock // set with envOptions.manualTicks
}

// countingClock schedules the waiter's timers on the fake clock and
// remembers when the latest fires, so a test knows when the waiter (or a
// flow pausing at its pace) sleeps on it and for how long.
type countingClock struct {
	*testingclock.FakeClock
	mu   sync.Mutex // guards last
	last time.Time  // when the latest timer fires; zero before the first
}

func (c *countingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = c.FakeClock.Now().Add(d)
	return c.FakeClock.After(d)
}

// sleeping reports whether the latest timer armed has not fired yet: the
// waiter sleeps on the clock, and a Step moves it on.
func (c *countingClock) sleeping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.After(c.FakeClock.Now())
}

// pause returns how long until the latest timer fires.
func (c *countingClock) pause() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last.Sub(c.FakeClock.Now())
}

type envOptions struct {
	fake []hcloudtest.Option
	// manualTicks drives the waiter's polls with the fake clock
	// instead of a 1 ms wall-clock interval.
	manualTicks bool
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	clock := testingclock.NewFakeClock(epoch)
	// The waiter polls every millisecond of wall time while the manual
	// clock stands still; the rate limit would only get in the way.
	fake := hcloudtest.NewServer(append([]hcloudtest.Option{hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0)}, eo.fake...)...)
	t.Cleanup(fake.Close)
	client := fake.Client()
	e := &env{t: t, fake: fake, clock: clock, client: client}
	wopts := []actionwait.Option{actionwait.WithPollInterval(time.Millisecond), actionwait.WithLogger(zaptest.NewLogger(t))}
	if eo.manualTicks {
		e.ticker = &countingClock{FakeClock: clock}
		wopts = []actionwait.Option{actionwait.WithPollInterval(actionwait.DefaultPollInterval), actionwait.WithClock(e.ticker)}
	}
	e.waiter = actionwait.New(&client.Action, wopts...)
	t.Cleanup(e.waiter.Close)
	e.cache = e.newCache()
	e.types = servercache.NewTypeCatalog(&client.ServerType, servercache.WithClock(clock))
	t.Cleanup(e.types.Close)
	e.images = imageresolve.New(&client.Image, imageresolve.WithClock(clock))
	t.Cleanup(e.images.Close)
	return e
}

func (e *env) newCache() *servercache.Cache {
	c := servercache.New(&e.client.Server, servercache.WithClock(e.clock), servercache.WithClusterName(testCluster))
	e.t.Cleanup(c.Close)
	return c
}

// poolConfig is a plain pool: no network, firewall, key or placement group.
func poolConfig(name string, minSize, maxSize int) config.Pool {
	return config.Pool{
		Name:       name,
		MinSize:    minSize,
		MaxSize:    maxSize,
		ServerType: "cx23",
		Location:   "fsn1",
		CloudInit:  testCloudInit,
		Images:     config.ImagesForArch{AMD64: "ubuntu-24.04", ARM64: "ubuntu-24.04"},
		ServerLabels: map[string]string{
			config.LabelNodeGroup: name,
			config.LabelCluster:   testCluster,
		},
		PublicIPv4: true,
		PublicIPv6: true,
	}
}

// deps returns the shared dependencies with the references resolved from
// the fake by the names in cfg.
func (e *env) deps(cfg config.Pool) Deps {
	e.t.Helper()
	ctx := e.t.Context()
	d := Deps{Servers: &e.client.Server, Waiter: e.waiter, Cache: e.cache, Types: e.types, Images: e.images}
	if cfg.Network != "" {
		n, _, err := e.client.Network.Get(ctx, cfg.Network)
		if err != nil || n == nil {
			e.t.Fatalf("network %q: %v, %v", cfg.Network, n, err)
		}
		d.Network = n
	}
	for _, name := range cfg.Firewalls {
		fw, _, err := e.client.Firewall.Get(ctx, name)
		if err != nil || fw == nil {
			e.t.Fatalf("firewall %q: %v, %v", name, fw, err)
		}
		d.Firewalls = append(d.Firewalls, fw)
	}
	for _, name := range cfg.SSHKeys {
		k, _, err := e.client.SSHKey.Get(ctx, name)
		if err != nil || k == nil {
			e.t.Fatalf("ssh key %q: %v, %v", name, k, err)
		}
		d.SSHKeys = append(d.SSHKeys, k)
	}
	if cfg.PlacementGroup != "" {
		pg, _, err := e.client.PlacementGroup.Get(ctx, cfg.PlacementGroup)
		if err != nil || pg == nil {
			e.t.Fatalf("placement group %q: %v, %v", cfg.PlacementGroup, pg, err)
		}
		d.PlacementGroup = pg
	}
	return d
}

// newPool builds a pool over the env with test defaults (fast retries,
// cluster name) and closes it at cleanup.
func (e *env) newPool(cfg config.Pool, opts ...Option) *Pool {
	e.t.Helper()
	return e.newPoolWith(cfg, e.deps(cfg), opts...)
}

func (e *env) newPoolWith(cfg config.Pool, deps Deps, opts ...Option) *Pool {
	e.t.Helper()
	all := append([]Option{
		WithLogger(zaptest.NewLogger(e.t)),
		WithClock(hcloudtest.WallWaits(e.clock)),
		WithRetry(3, time.Millisecond),
		WithClusterName(testCluster),
	}, opts...)
	p, err := New(cfg, deps, all...)
	if err != nil {
		e.t.Fatalf("New(%q) error: %v", cfg.Name, err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			e.t.Errorf("Close(%q) error: %v", cfg.Name, err)
		}
	})
	return p
}

// addReferences creates a network with a subnet, a firewall, an SSH key
// and a placement group in the fake.
func (e *env) addReferences() {
	e.t.Helper()
	if _, err := e.fake.AddNetwork(hcloudtest.Network{
		Name: "net", IPRange: "10.0.0.0/16",
		Subnets: []hcloudtest.Subnet{{IPRange: "10.0.0.0/24"}, {IPRange: "10.0.1.0/24"}},
	}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.fake.AddFirewall(hcloudtest.Firewall{Name: "fw"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.fake.AddFirewall(hcloudtest.Firewall{Name: "fw2"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.fake.AddSSHKey(hcloudtest.SSHKey{Name: "key"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.fake.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "pg"}); err != nil {
		e.t.Fatal(err)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

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
			e.clock.Step(step)
		}
		time.Sleep(time.Millisecond)
	}
}

// settled reports whether the pool has no create flow or delete wait in
// flight.
func settled(p *Pool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.claims {
		if c.phase != claimFailed {
			return false
		}
	}
	return len(p.deleting) == 0 && len(p.tasks) == 0
}

// settle advances the clock until the pool has settled.
func (e *env) settle(p *Pool) {
	e.t.Helper()
	e.eventually("pool "+p.Name()+" to settle", 100*time.Millisecond, func() bool { return settled(p) })
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

// countStates counts instances by state and errors.
func countStates(in []Instance) map[string]int {
	m := map[string]int{}
	for _, i := range in {
		k := i.State.String()
		if i.Error != nil {
			k += "/" + i.Error.Class.String() + "/" + i.Error.Code
		}
		m[k]++
	}
	return m
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func netipAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a
}
