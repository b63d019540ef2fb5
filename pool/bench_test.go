package pool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// BenchmarkScaleUp scales a pool from 0 to n on the wall clock against a
// fake whose create actions take 2 s (create_server 2 s, start_server 0)
// and whose every request takes 20 ms, with the default poll interval and
// create concurrency. It reports, per scale-up:
//
//   - return-ms: how long IncreaseSize took to return;
//   - running-s: from the call until every server runs;
//   - requests: every API request from the first listing on (listing,
//     server types, image, creates, polls).
//
// Run: go test -run '^$' -bench BenchmarkScaleUp -benchtime 3x ./pool/
func BenchmarkScaleUp(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var ret, running time.Duration
			var requests, creates, polls int
			for range b.N {
				r := scaleUpOnce(b, n)
				ret += r.ret
				running += r.running
				requests += r.requests
				creates += r.creates
				polls += r.polls
			}
			b.ReportMetric(float64(ret.Microseconds())/1000/float64(b.N), "return-ms")
			b.ReportMetric(running.Seconds()/float64(b.N), "running-s")
			b.ReportMetric(float64(requests)/float64(b.N), "requests")
			b.ReportMetric(float64(creates)/float64(b.N), "creates")
			b.ReportMetric(float64(polls)/float64(b.N), "polls")
			b.ReportMetric(0, "ns/op") // the wall time above is the measure
		})
	}
}

type scaleUpResult struct {
	ret, running             time.Duration
	requests, creates, polls int
}

func scaleUpOnce(b *testing.B, n int) scaleUpResult {
	b.Helper()
	fake := hcloudtest.NewServer(
		hcloudtest.WithActionDuration("create_server", 2*time.Second),
		hcloudtest.WithActionDuration("start_server", 0),
		hcloudtest.WithRateLimit(0, 0),
	)
	defer fake.Close()
	fake.SetLatency(20 * time.Millisecond)
	p, cache, closePool := benchPool(b, fake, poolConfig("workers", 0, n))
	defer closePool()

	ctx := context.Background()
	// The autoscaler's loop starts with Refresh: the one listing.
	if _, err := cache.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := p.IncreaseSize(ctx, n); err != nil {
		b.Fatal(err)
	}
	ret := time.Since(start)
	for {
		st := p.Status()
		if st.Running == n {
			break
		}
		if st.Failed > 0 {
			b.Fatalf("scale-up failed: %+v", st.Errors)
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("scale-up of %d did not finish: %+v", n, st)
		}
		time.Sleep(time.Millisecond)
	}
	running := time.Since(start)
	return scaleUpResult{
		ret: ret, running: running,
		requests: len(fake.Requests()),
		creates:  fake.Count("POST /servers"),
		polls:    fake.Count("GET /actions"),
	}
}

// BenchmarkDrift measures Pool.Drift over a pool of 5,000 listed servers,
// each with an image other than the pool's and a user-data hash that
// differs: with a cloud-init sent as written (one hash for all) and with a
// template rendered per server. A Cluster pays it at most once per
// Refresh, when the snapshot or configuration changed
// (hcloudscale_pool_drifted_servers). The catalogue and the image are
// cached after the first call.
//
// Run: go test -run '^$' -bench BenchmarkDrift -benchmem ./pool/
func BenchmarkDrift(b *testing.B) {
	const n = 5000
	for _, template := range []bool{false, true} {
		b.Run(map[bool]string{false: "static", true: "template"}[template], func(b *testing.B) {
			fake := hcloudtest.NewServer(hcloudtest.WithRateLimit(0, 0))
			defer fake.Close()
			cfg := poolConfig("workers", 0, n)
			cfg.CloudInit = "#cloud-config\nhostname: <% .ServerName %>\nwrite_files:\n  - path: /etc/pool\n    content: <% .Pool %>\n"
			cfg.CloudInitTemplate = template
			p, cache, closePool := benchPool(b, fake, cfg)
			defer closePool()
			// The servers' image: an older snapshot than the pool's.
			old, err := fake.AddImage(hcloudtest.Image{Description: "old node image"})
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if _, err := fake.AddServer(hcloudtest.ServerInfo{
					Name: fmt.Sprintf("workers-%016x", i), Status: hcloud.ServerStatusRunning, ServerType: "cx23", Location: "fsn1", ImageID: old,
					Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster, config.LabelUserDataHash: "0123456789abcdef"},
				}); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			if _, err := cache.Refresh(ctx); err != nil {
				b.Fatal(err)
			}
			if d, err := p.Drift(ctx); err != nil || len(d) != n || !slices.Equal(d[0].Reasons, []DriftReason{DriftImage, DriftUserData}) {
				b.Fatalf("Drift: %d servers, %v; want all %d drifted on image and user data", len(d), err, n)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Drift(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPool builds a pool over fake with the real clients; closing it
// closes them all, before the fake.
func benchPool(b *testing.B, fake *hcloudtest.Server, cfg config.Pool) (*Pool, *servercache.Cache, func()) {
	b.Helper()
	client := fake.Client()
	waiter := actionwait.New(&client.Action)
	cache := servercache.New(&client.Server, servercache.WithClusterName(testCluster))
	types := servercache.NewTypeCatalog(&client.ServerType)
	images := imageresolve.New(&client.Image)
	p, err := New(cfg, Deps{Servers: &client.Server, Waiter: waiter, Cache: cache, Types: types, Images: images},
		WithClusterName(testCluster))
	if err != nil {
		b.Fatal(err)
	}
	return p, cache, func() {
		_ = p.Close(context.Background())
		images.Close()
		types.Close()
		cache.Close()
		waiter.Close()
	}
}
