package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/actionwait"
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
	client := fake.Client()
	waiter := actionwait.New(&client.Action)
	defer waiter.Close()
	cache := servercache.New(&client.Server, servercache.WithClusterName(testCluster))
	defer cache.Close()
	types := servercache.NewTypeCatalog(&client.ServerType)
	defer types.Close()
	images := imageresolve.New(&client.Image)
	defer images.Close()
	p, err := New(poolConfig("workers", 0, n), Deps{Servers: &client.Server, Waiter: waiter, Cache: cache, Types: types, Images: images},
		WithClusterName(testCluster))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()

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
