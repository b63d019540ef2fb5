package servercache

import (
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestListingCostAtScale drives a cache the way an autoscaler loop does,
// one Get every 10 s, for three simulated hours against 10,000 servers,
// and counts the GET /servers pages the fake API served. Every expiry
// falls at the low end of the jitter, the most listings the policy allows.
//
// It decodes 600 pages of 50 servers, which the race detector
// makes take minutes; it runs without it:
//
//	go test -run TestListingCostAtScale -v ./servercache/
func TestListingCostAtScale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("decodes 600 pages of servers; run without -race and -short")
	}
	const (
		servers  = 10_000
		interval = 10 * time.Second
		hours    = 3
		// A tenth of Hetzner's default 3,600 requests per hour.
		maxPerHour = 360
	)
	// The fake's own limiter would refill on the manual clock too, but
	// this test measures our cost, not the limiter.
	fake, client, clock := newFake(t, hcloudtest.WithRateLimit(0, 0))
	addServers(t, fake, "w", servers, poolLabels("w", ""))
	c := New(&client.Server, WithClock(clock), WithRand(func() float64 { return 0 }))
	defer c.Close()

	perHour := make([]int, hours)
	for i := range hours * int(time.Hour/interval) {
		before := fake.Count(listServers)
		snap, err := c.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() at %v error: %v", clock.Now().Sub(epoch), err)
		}
		if snap.Len() != servers {
			t.Fatalf("Get() at %v returned %d servers; want %d", clock.Now().Sub(epoch), snap.Len(), servers)
		}
		perHour[i*int(interval)/int(time.Hour)] += fake.Count(listServers) - before
		clock.Step(interval)
	}

	total := fake.Count(listServers)
	avg := float64(total) / hours
	t.Logf("%d servers, a Get every %v for %d h: %d GET /servers requests, %.0f per hour on average; per clock hour %v",
		servers, interval, hours, total, avg, perHour)
	for h, n := range perHour {
		if n > maxPerHour {
			t.Errorf("hour %d: listings cost %d requests; want at most %d", h, n, maxPerHour)
		}
	}
	// With every expiry at the low end of the jitter a listing comes every
	// 66 2/3 minutes: at 0, 66.7 and 133.3 minutes.
	if want := 3 * servers / pageSize; total != want {
		t.Errorf("made %d listing requests; want %d (3 listings of %d pages)", total, want, servers/pageSize)
	}
}
