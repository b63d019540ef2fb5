package hcloudscale_test

import (
	"context"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestScaleUpWithinSmallRateLimit scales a pool by 30 against a bucket of
// 50 requests refilled by one per second, on the wall clock (the pacer
// waits in real time). Upstream on the same setup: 24 to 25 of 30 creates
// fail, 2 to 6 servers leak powered off, about 300 answers are 429.
//
// With the full bucket the whole scale-up fits into it; with 20 of the 50
// already spent by other tools, the pacer has to spread the creates and
// polls over the refill.
func TestScaleUpWithinSmallRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("paces requests in real time for about 15 s")
	}
	for _, tc := range []struct {
		name      string
		remaining int // the bucket when the scale-up starts; 0: as New left it
	}{
		{name: "full bucket"},
		{name: "20 spent by other tools", remaining: 30},
	} {
		t.Run(tc.name, func(t *testing.T) { scaleUpWithinRateLimit(t, tc.remaining) })
	}
}

func scaleUpWithinRateLimit(t *testing.T, remaining int) {
	ignore := goleak.IgnoreCurrent()
	e := newFaultEnv(t, faultOptions{
		realClock: true,
		fake: []hcloudtest.Option{
			hcloudtest.WithRateLimit(50, time.Second),
			hcloudtest.WithActionDuration("create_server", time.Second),
			hcloudtest.WithActionDuration("start_server", 500*time.Millisecond),
		},
		cluster: []hcloudscale.Option{hcloudscale.WithPollInterval(hcloudscale.DefaultPollInterval)},
		nodes:   []string{"0:30:cpx21:fsn1:plain"},
	})
	defer e.stop()
	p := e.c.Pool("plain")

	if remaining > 0 {
		e.api().SetRateLimitRemaining(remaining)
	}
	start := time.Now()
	if err := p.IncreaseSize(context.Background(), 30); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for p.Status().Running < 30 {
		if st := p.Status(); st.Failed > 0 {
			t.Fatalf("scale-up failed: %+v", st.Errors)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40 s: %+v", p.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, observe(t, e.c, e.api()), nil)
	running := 0
	for _, s := range poolServers(t, e.api(), "plain") {
		if s.Status == hcloud.ServerStatusRunning {
			running++
		}
	}
	if running != 30 {
		t.Errorf("the API runs %d servers of the pool; want 30", running)
	}
	if got := count429(e.api()); got > 1 {
		t.Errorf("the API answered %d requests with 429; want at most 1", got)
	}
	rl := e.c.RateLimit()
	if remaining > 0 && rl.Waited == 0 {
		t.Errorf("RateLimit().Waited = 0; want the pacer to have held requests back")
	}
	t.Logf("30 servers running after %s; %d requests, %d answered 429, pacer waited %s in total",
		took.Round(time.Millisecond), len(e.api().Requests()), count429(e.api()), rl.Waited.Round(time.Millisecond))
	e.stop()
	checkNoLeaks(t, ignore)
}
