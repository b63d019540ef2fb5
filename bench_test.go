package hcloudscale_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// benchProject starts a fake with a firewall and an SSH key and loads a
// configuration of pools workers, arm and dedicated (any of them may be
// left out of nodes) without a network: the servers start with their
// create, as in the pool package's benchmark.
func benchProject(tb testing.TB, nodes []string, opts ...hcloudtest.Option) (*hcloudtest.Server, *config.Config) {
	tb.Helper()
	api := hcloudtest.NewServer(opts...)
	tb.Cleanup(api.Close)
	for _, err := range []error{
		second(api.AddFirewall(hcloudtest.Firewall{Name: "nodes"})),
		second(api.AddSSHKey(hcloudtest.SSHKey{Name: "ops"})),
	} {
		if err != nil {
			tb.Fatal(err)
		}
	}
	doc, err := json.Marshal(clusterConfig{
		"clusterName":   "prod",
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers":   map[string]any{"cloudInit": faultCloudInit},
			"arm":       map[string]any{"cloudInit": faultCloudInit},
			"dedicated": map[string]any{"cloudInit": faultCloudInit},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := config.Load(config.MapEnv(map[string]string{
		"HCLOUD_TOKEN":          api.Token(),
		"HCLOUD_ENDPOINT":       api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc),
		"HCLOUD_FIREWALL":       "nodes",
		"HCLOUD_SSH_KEY":        "ops",
	}, nil), nodes)
	if err != nil {
		tb.Fatal(err)
	}
	return api, cfg
}

func second(_ int64, err error) error { return err }

// BenchmarkClusterScaleUp scales a pool of a Cluster from 0 to n on the
// wall clock, against a fake whose create actions take 2 s (create_server
// 2 s, start_server 0) and whose every request takes 20 ms, with the
// Cluster's defaults (poll interval 500 ms, create concurrency 10, pacer,
// debug transport). Per scale-up it reports:
//
//   - return-ms: how long IncreaseSize took to return;
//   - running-s: from the call until every server runs;
//   - requests: every API request after New (creates, polls, and any
//     listing, catalogue or image lookup the scale-up needed);
//   - creates and polls: POST /servers and GET /actions among them;
//   - new-requests: what New cost (one lookup per reference, catalogue,
//     image, first listing).
//
// Run: go test -run '^$' -bench BenchmarkClusterScaleUp -benchtime 3x .
func BenchmarkClusterScaleUp(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var ret, running time.Duration
			var requests, creates, polls, startup int
			for range b.N {
				r := clusterScaleUpOnce(b, n)
				ret += r.ret
				running += r.running
				requests += r.requests
				creates += r.creates
				polls += r.polls
				startup += r.startup
			}
			per := float64(b.N)
			b.ReportMetric(float64(ret.Microseconds())/1000/per, "return-ms")
			b.ReportMetric(running.Seconds()/per, "running-s")
			b.ReportMetric(float64(requests)/per, "requests")
			b.ReportMetric(float64(creates)/per, "creates")
			b.ReportMetric(float64(polls)/per, "polls")
			b.ReportMetric(float64(startup)/per, "new-requests")
			b.ReportMetric(0, "ns/op") // the wall times above are the measure
		})
	}
}

type clusterScaleUp struct {
	ret, running                      time.Duration
	requests, creates, polls, startup int
}

func clusterScaleUpOnce(b *testing.B, n int) clusterScaleUp {
	b.Helper()
	api, cfg := benchProject(b, []string{fmt.Sprintf("0:%d:cpx21:fsn1:workers", n)},
		hcloudtest.WithActionDuration("create_server", 2*time.Second),
		hcloudtest.WithActionDuration("start_server", 0))
	defer api.Close()
	api.SetLatency(20 * time.Millisecond)
	ctx := context.Background()
	c, err := hcloudscale.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	var r clusterScaleUp
	r.startup = len(api.Requests())
	api.ResetCounts()

	p := c.Pool("workers")
	start := time.Now()
	if err := c.Refresh(ctx); err != nil { // the autoscaler loop's first call
		b.Fatal(err)
	}
	if err := p.IncreaseSize(ctx, n); err != nil {
		b.Fatal(err)
	}
	r.ret = time.Since(start)
	awaitScaleUp(b, api, p, n, start, &r)
	return r
}

// awaitScaleUp waits until p runs target servers and fills in r the time
// since start and the requests the fake counted.
func awaitScaleUp(b *testing.B, api *hcloudtest.Server, p *pool.Pool, target int, start time.Time, r *clusterScaleUp) {
	b.Helper()
	for {
		st := p.Status()
		if st.Running == target {
			break
		}
		if st.Failed > 0 {
			b.Fatalf("scale-up failed: %+v", st.Errors)
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("scale-up to %d did not finish: %+v", target, st)
		}
		time.Sleep(time.Millisecond)
	}
	r.running = time.Since(start)
	r.requests = len(api.Requests())
	r.creates = api.Count("POST /servers")
	r.polls = api.Count("GET /actions")
}

// loopFleet is a Cluster over a project with servers of three pools
// (200 in all by default) and three control-plane servers, on a manual
// clock, as the autoscaler's steady state sees it.
type loopFleet struct {
	api   *hcloudtest.Server
	clock *hcloudtest.ManualClock
	cfg   *config.Config
	c     *hcloudscale.Cluster
	nodes [][2]string // provider ID and node name of every Kubernetes node
}

func newLoopFleet(tb testing.TB, perPool [3]int) *loopFleet {
	tb.Helper()
	clock := hcloudtest.NewManualClock(faultEpoch)
	api, cfg := benchProject(tb, []string{
		fmt.Sprintf("0:%d:cpx21:fsn1:workers", perPool[0]),
		fmt.Sprintf("0:%d:cax11:nbg1:arm", perPool[1]),
		fmt.Sprintf("0:%d:ccx13:hel1:dedicated", perPool[2]),
	}, hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0))
	f := &loopFleet{api: api, clock: clock}
	types := map[string]string{"workers": "cpx21", "arm": "cax11", "dedicated": "ccx13"}
	locs := map[string]string{"workers": "fsn1", "arm": "nbg1", "dedicated": "hel1"}
	for i, name := range []string{"workers", "arm", "dedicated"} {
		for j := range perPool[i] {
			id, err := api.AddServer(hcloudtest.ServerInfo{
				Name: fmt.Sprintf("%s-%04d", name, j), ServerType: types[name], Location: locs[name],
				Status: hcloud.ServerStatusRunning,
				Labels: map[string]string{config.LabelNodeGroup: name, config.LabelCluster: "prod"},
			})
			if err != nil {
				tb.Fatal(err)
			}
			f.nodes = append(f.nodes, [2]string{"hcloud://" + strconv.FormatInt(id, 10), fmt.Sprintf("%s-%04d", name, j)})
		}
	}
	for j := range 3 {
		id, err := api.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("control-plane-%d", j), Status: hcloud.ServerStatusRunning})
		if err != nil {
			tb.Fatal(err)
		}
		f.nodes = append(f.nodes, [2]string{"hcloud://" + strconv.FormatInt(id, 10), fmt.Sprintf("control-plane-%d", j)})
	}
	f.cfg = cfg
	f.c = f.start(tb)
	tb.Cleanup(func() {
		if f.c != nil {
			_ = f.c.Close(context.Background())
		}
	})
	return f
}

func (f *loopFleet) start(tb testing.TB) *hcloudscale.Cluster {
	tb.Helper()
	c, err := hcloudscale.New(context.Background(), f.cfg, hcloudscale.WithClock(hcloudtest.WallWaits(f.clock)))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// loop is one autoscaler loop over the Cluster: Refresh, the node group
// of every node, and TargetSize and Instances of every pool. It returns
// the pool servers it found.
func (f *loopFleet) loop(ctx context.Context) (int, error) {
	if err := f.c.Refresh(ctx); err != nil {
		return 0, err
	}
	found := 0
	for _, n := range f.nodes {
		if f.c.PoolForNode(n[0], n[1]) != nil {
			found++
		}
	}
	for _, p := range f.c.Pools() {
		_ = p.TargetSize()
		_ = p.Instances()
	}
	return found, nil
}

// TestAutoscalerLoopCost runs the autoscaler's loop every 10 s for a
// simulated hour over 200 nodes and counts the requests: only the
// listings cost any, 4 pages of 50 each, one per TTL as the cache sets it
// (60 s, stretched to keep within its listing budget). With -v it prints
// the numbers for BENCHMARKS.md.
//
//	go test -run TestAutoscalerLoopCost -v .
func TestAutoscalerLoopCost(t *testing.T) {
	f := newLoopFleet(t, [3]int{120, 50, 30})
	f.api.ResetCounts()
	ctx := context.Background()
	const loops = 360 // one hour of 10 s loops
	start := time.Now()
	for range loops {
		f.clock.Advance(10 * time.Second)
		found, err := f.loop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if found != 200 {
			t.Fatalf("the loop found %d pool servers; want 200", found)
		}
	}
	took := time.Since(start)
	counts := f.api.Counts()
	total := len(f.api.Requests())
	listings := counts["GET /servers"]
	// The floor is one listing (4 pages) per effective TTL, which the
	// cache stretches from 60 s so that listings stay within its budget.
	if listings != total {
		t.Errorf("requests in an hour of loops = %v; want server listings only", counts)
	}
	if listings > servercache.DefaultListingBudget || listings%4 != 0 {
		t.Errorf("%d listing requests in an hour; want whole listings of 4 pages within the cache's budget of %d", listings, servercache.DefaultListingBudget)
	}
	t.Logf("200 nodes + 3 control planes, %d loops of 10 s: %d requests in the simulated hour (%d listings of 4 pages); %s of wall time per loop",
		loops, total, listings/4, (took / loops).Round(time.Microsecond))
}

// BenchmarkAutoscalerLoop measures one steady-state loop (no listing due)
// over 200 and 10,000 nodes: the lookups and the per-pool answers.
//
//	go test -run '^$' -bench BenchmarkAutoscalerLoop -benchmem .
func BenchmarkAutoscalerLoop(b *testing.B) {
	for _, perPool := range [][3]int{{120, 50, 30}, {6000, 2500, 1500}} {
		b.Run(strconv.Itoa(perPool[0]+perPool[1]+perPool[2]), func(b *testing.B) {
			f := newLoopFleet(b, perPool)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := f.loop(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClusterMemory reports the heap a Cluster keeps for its pools'
// servers after New has listed them (the servercache snapshot plus the
// pools, catalogue and clients), at 200 and 10,000 servers.
//
//	go test -run '^$' -bench BenchmarkClusterMemory -benchtime 1x .
func BenchmarkClusterMemory(b *testing.B) {
	for _, perPool := range [][3]int{{120, 50, 30}, {6000, 2500, 1500}} {
		b.Run(strconv.Itoa(perPool[0]+perPool[1]+perPool[2]), func(b *testing.B) {
			var heap float64
			for range b.N {
				f := newLoopFleet(b, perPool)
				_ = f.c.Close(context.Background())
				f.c = nil
				// The fake and its servers stay; the difference is the
				// Cluster New builds over them (its listing included).
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				f.c = f.start(b)
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
				if found, err := f.loop(context.Background()); err != nil || found != len(f.nodes)-3 {
					b.Fatalf("loop found %d servers, %v; want %d", found, err, len(f.nodes)-3)
				}
			}
			b.ReportMetric(heap/float64(b.N), "cluster-MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkPoolForNode measures the autoscaler's NodeGroupForNode through
// the Cluster at 10,000 servers: by provider ID, by node name, and for a
// control-plane node that belongs to no pool.
//
//	go test -run '^$' -bench BenchmarkPoolForNode -benchmem .
func BenchmarkPoolForNode(b *testing.B) {
	f := newLoopFleet(b, [3]int{6000, 2500, 1500})
	for _, tc := range []struct {
		name             string
		providerID, node string
		wantPool         bool
	}{
		{"provider ID", f.nodes[4711][0], "", true},
		{"node name", "", f.nodes[4711][1], true},
		{"control plane", f.nodes[len(f.nodes)-1][0], f.nodes[len(f.nodes)-1][1], false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if got := f.c.PoolForNode(tc.providerID, tc.node) != nil; got != tc.wantPool {
				b.Fatalf("PoolForNode(%q, %q) found a pool: %t; want %t", tc.providerID, tc.node, got, tc.wantPool)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = f.c.PoolForNode(tc.providerID, tc.node)
			}
		})
	}
}

// BenchmarkClusterActionDurations measures what waiting for actions costs
// at real create durations: a Cluster with its defaults scales one pool
// up twice on the wall clock (20 ms per request), first with nothing
// learned, then again with the durations of the first scale-up learned.
// Sub-benchmarks name the create durations (create_server; start_server
// follows it at once) and the scale-up; "2s-15s-50" learns from 2 s
// creates and then meets 15 s ones. Per scale-up it reports the requests
// (creates and action polls) and the time from IncreaseSize until every
// new server runs: first-* for the first, the others for the second.
//
// Run: go test -run '^$' -bench BenchmarkClusterActionDurations -benchtime 1x .
func BenchmarkClusterActionDurations(b *testing.B) {
	for _, tt := range []struct {
		name          string
		first, second time.Duration
		n             int
	}{
		{"15s-50", 15 * time.Second, 15 * time.Second, 50},
		{"15s-10", 15 * time.Second, 15 * time.Second, 10},
		{"2s-50", 2 * time.Second, 2 * time.Second, 50},
		{"2s-15s-50", 2 * time.Second, 15 * time.Second, 50},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var first, second clusterScaleUp
			for range b.N {
				f, s := clusterScaleUpTwice(b, tt.n, tt.first, tt.second)
				first.add(f)
				second.add(s)
			}
			per := float64(b.N)
			b.ReportMetric(float64(first.requests)/per, "first-requests")
			b.ReportMetric(float64(first.polls)/per, "first-polls")
			b.ReportMetric(first.running.Seconds()/per, "first-running-s")
			b.ReportMetric(float64(second.requests)/per, "requests")
			b.ReportMetric(float64(second.polls)/per, "polls")
			b.ReportMetric(second.running.Seconds()/per, "running-s")
			b.ReportMetric(0, "ns/op") // the wall times above are the measure
		})
	}
}

func (r *clusterScaleUp) add(o clusterScaleUp) {
	r.ret += o.ret
	r.running += o.running
	r.requests += o.requests
	r.creates += o.creates
	r.polls += o.polls
}

// clusterScaleUpTwice scales a pool from 0 to n with creates of d1, then
// from n to 2n with creates of d2, and measures both.
func clusterScaleUpTwice(b *testing.B, n int, d1, d2 time.Duration) (first, second clusterScaleUp) {
	b.Helper()
	api, cfg := benchProject(b, []string{fmt.Sprintf("0:%d:cpx21:fsn1:workers", 2*n)},
		hcloudtest.WithActionDuration("create_server", d1),
		hcloudtest.WithActionDuration("start_server", 0))
	defer api.Close()
	api.SetLatency(20 * time.Millisecond)
	ctx := context.Background()
	c, err := hcloudscale.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	p := c.Pool("workers")
	scale := func(target int) clusterScaleUp {
		api.ResetCounts()
		start := time.Now()
		if err := c.Refresh(ctx); err != nil { // the autoscaler loop's first call
			b.Fatal(err)
		}
		if err := p.IncreaseSize(ctx, n); err != nil {
			b.Fatal(err)
		}
		var r clusterScaleUp
		r.ret = time.Since(start)
		awaitScaleUp(b, api, p, target, start, &r)
		return r
	}
	first = scale(n)
	api.SetActionDuration("create_server", d2)
	second = scale(2 * n)
	return first, second
}
