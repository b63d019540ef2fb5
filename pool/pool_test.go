package pool

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/metrics"
	"github.com/hcloudscale/hcloudscale/internal/metrics/metricstest"
)

func TestNewReportsEveryProblem(t *testing.T) {
	e := newEnv(t, envOptions{})
	good := poolConfig("workers", 1, 3)
	deps := e.deps(good)
	tests := []struct {
		name  string
		cfg   func(*config.Pool)
		deps  func(*Deps)
		opts  []Option
		wants []string
	}{
		{name: "bad name and sizes", cfg: func(p *config.Pool) { p.Name, p.MinSize, p.MaxSize = "Bad_Name", 3, 1 },
			wants: []string{`pool name "Bad_Name"`, "max size 1 is below min size 3", "server label hcloud/node-group"}},
		{name: "negative min", cfg: func(p *config.Pool) { p.MinSize = -1 }, wants: []string{"min size -1 is negative"}},
		{name: "missing type and location", cfg: func(p *config.Pool) { p.ServerType, p.Location = "", "" },
			wants: []string{"server type is empty", "location is empty"}},
		{name: "unresolved references", cfg: func(p *config.Pool) {
			p.Network, p.PlacementGroup, p.Firewalls, p.SSHKeys = "net", "pg", []string{"fw"}, []string{"k"}
		}, wants: []string{`network "net"`, `placement group "pg"`, "1 firewalls configured, 0 resolved", "1 SSH keys configured, 0 resolved"}},
		{name: "subnet without network", cfg: func(p *config.Pool) { p.SubnetIPRange = mustPrefix("10.0.0.0/24") },
			wants: []string{"subnet IP range 10.0.0.0/24 needs a network"}},
		{name: "missing deps", deps: func(d *Deps) { d.Waiter = nil }, wants: []string{"Servers, Waiter, Cache, Types and Images are required"}},
		{name: "cluster label", opts: []Option{WithClusterName("prod")}, wants: []string{`want the cluster name "prod"`}},
		{name: "bad options", opts: []Option{WithCreateConcurrency(0), WithDeleteConcurrency(-1), WithCreationTimeout(-time.Second), WithUnavailableTTL(-time.Second), WithRetry(0, 0), WithSpreadGrace(-time.Minute)},
			wants: []string{"create concurrency 0", "delete concurrency -1", "creation timeout -1s", "unavailable TTL -1s", "retry: 0 attempts", "spread grace -1m0s is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := poolConfig("workers", 1, 3)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := deps
			if tt.deps != nil {
				tt.deps(&d)
			}
			_, err := New(cfg, d, tt.opts...)
			if err == nil {
				t.Fatal("New() = nil error")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := New(good, deps); err != nil {
		t.Errorf("New(valid) error: %v", err)
	}
}

func TestClaimIDRoundTrip(t *testing.T) {
	tests := []struct {
		id         string
		pool, name string
		ok         bool
	}{
		{id: ClaimID("workers", "workers-0123456789abcdef"), pool: "workers", name: "workers-0123456789abcdef", ok: true},
		{id: "hcloudscale://workers/", ok: false},
		{id: "hcloudscale:///name", ok: false},
		{id: "hcloudscale://workers/a/b", ok: false},
		{id: "hcloud://42", ok: false},
		{id: "workers-1", ok: false},
	}
	for _, tt := range tests {
		pool, name, ok := ParseClaimID(tt.id)
		if pool != tt.pool || name != tt.name || ok != tt.ok {
			t.Errorf("ParseClaimID(%q) = %q, %q, %t; want %q, %q, %t", tt.id, pool, name, ok, tt.pool, tt.name, tt.ok)
		}
	}
}

func TestPrice(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 3))
	if _, err := p.Price(epoch, epoch.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("Price() before the catalogue is loaded = %v; want a not-loaded error", err)
	}
	st, err := e.types.Lookup(t.Context(), "cx23")
	if err != nil || st == nil {
		t.Fatal(st, err)
	}
	hourly := st.Locations["fsn1"].PriceHourlyNet
	got, err := p.Price(epoch, epoch.Add(90*time.Minute))
	if err != nil {
		t.Fatalf("Price() error: %v", err)
	}
	if want := 1.5 * hourly; math.Abs(got-want) > 1e-12 || want <= 0 {
		t.Errorf("Price(90 min) = %v; want %v", got, want)
	}
	if _, err := p.Price(epoch, epoch.Add(-time.Hour)); err == nil {
		t.Error("Price(end before start) = nil error")
	}
	cfg := poolConfig("elsewhere", 0, 3)
	cfg.Location = "nowhere"
	if _, err := e.newPool(cfg).Price(epoch, epoch.Add(time.Hour)); err == nil {
		t.Error("Price() for a location without price = nil error")
	}
}

func TestOptions(t *testing.T) {
	e := newEnv(t, envOptions{})
	defaults := AutoscalingOptions{
		ScaleDownUtilizationThreshold: 0.5, ScaleDownUnneededTime: 10 * time.Minute,
		ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute,
		MaxNodeStartupTime: 15 * time.Minute,
	}
	plain := e.newPool(poolConfig("plain", 0, 3))
	if got, ok := plain.Options(defaults); got != nil || ok {
		t.Errorf("Options() without pool settings = %+v, %t; want nil, false", got, ok)
	}
	threshold, provision, zeroOrMax := 0.7, 30*time.Minute, true
	cfg := poolConfig("tuned", 0, 3)
	cfg.Autoscaling = &config.Autoscaling{
		ScaleDownUtilizationThreshold: &threshold,
		MaxNodeProvisionTime:          &provision,
		ZeroOrMaxNodeScaling:          &zeroOrMax,
	}
	got, ok := e.newPool(cfg).Options(defaults)
	want := defaults
	want.ScaleDownUtilizationThreshold, want.MaxNodeProvisionTime, want.ZeroOrMaxNodeScaling = 0.7, 30*time.Minute, true
	if !ok || got == nil {
		t.Fatalf("Options() = %v, %t; want the pool's settings", got, ok)
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("Options() (-want +got):\n%s", diff)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	reg := prometheus.NewPedanticRegistry()
	p := e.newPool(poolConfig("workers", 1, 10), WithRegisterer(reg))
	// A second pool on the same registerer reuses the collectors.
	q := e.newPool(poolConfig("other", 0, 5), WithRegisterer(reg))
	e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "resource_unavailable"})
	if err := p.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	ins := p.Instances()
	var running []string
	for _, in := range ins {
		if in.State == Running {
			running = append(running, in.ID)
		}
	}
	if err := p.DeleteInstances(t.Context(), running[:1]); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	q.Instances()

	m, err := metrics.New(reg) // the collectors registered by the pools
	if err != nil {
		t.Fatalf("metrics.New on a used registry: %v", err)
	}
	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"target", m.PoolTargetSize.WithLabelValues("workers"), 2},
		{"running", m.PoolInstances.WithLabelValues("workers", "running"), 1},
		{"failed", m.PoolInstances.WithLabelValues("workers", "failed"), 1},
		{"pending", m.PoolPendingClaims.WithLabelValues("workers"), 0},
		{"creates ok", m.ServerCreates.WithLabelValues("workers", metrics.ResultSuccess, ""), 2},
		{"creates failed", m.ServerCreates.WithLabelValues("workers", metrics.ResultError, "resource_unavailable"), 1},
		{"deletes", m.ServerDeletes.WithLabelValues("workers", metrics.ResultSuccess, ""), 1},
		{"unavailable", m.UnavailableOfferings.WithLabelValues("cx23", "fsn1"), 1},
		{"other target", m.PoolTargetSize.WithLabelValues("other"), 0},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v; want %v", c.name, got, c.want)
		}
	}
	for _, g := range []struct {
		name, pool string
		want       float64
	}{
		{"hcloudscale_pool_min_size", "workers", 1},
		{"hcloudscale_pool_max_size", "other", 5},
		{"hcloudscale_pool_configured_max_size", "workers", 10},
	} {
		if got := metricstest.Gauge(t, reg, g.name, g.pool); got != g.want {
			t.Errorf("%s{pool=%q} = %v; want %v", g.name, g.pool, got, g.want)
		}
	}
	if got := testutil.CollectAndCount(m.ServerCreateDuration); got != 1 {
		t.Errorf("create duration series = %d; want 1", got)
	}
	if _, err := testutil.GatherAndLint(reg); err != nil {
		t.Errorf("lint: %v", err)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.PoolTargetSize); n != 1 {
		t.Errorf("target size series after closing one pool = %d; want 1", n)
	}
	if n := testutil.CollectAndCount(m.Bounds, "hcloudscale_pool_max_size"); n != 1 {
		t.Errorf("max size series after closing one pool = %d; want 1", n)
	}
}

func TestClosedPoolRefusesChanges(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, 10))
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"IncreaseSize":       p.IncreaseSize(ctx, 1),
		"DecreaseTargetSize": p.DecreaseTargetSize(ctx, -1),
		"DeleteInstances":    p.DeleteInstances(ctx, []string{"x"}),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v; want ErrClosed", name, err)
		}
	}
	if got := e.fake.Count("POST /servers"); got != 0 {
		t.Errorf("POST /servers = %d; want 0", got)
	}
}

func TestCloseStopsFlowsInFlight(t *testing.T) {
	e := newEnv(t, envOptions{fake: []hcloudtest.Option{hcloudtest.WithActionDuration("create_server", time.Hour)}})
	p := e.newPool(poolConfig("workers", 0, 10))
	if err := p.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	e.eventually("the servers", 0, func() bool { return len(e.servers("workers")) == 3 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with flows in flight = %v; want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s; want it bounded by its ctx", d)
	}
	// goleak in TestMain checks that no flow goroutine is left; the
	// servers stay for the next Pool to adopt.
	for _, s := range e.servers("workers") {
		if s.Status == hcloud.ServerStatusDeleting {
			t.Errorf("server %s is being deleted; Close must leave it", s.Name)
		}
	}
}
