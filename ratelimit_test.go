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

// TestPacedRequestOutlastsRequestTimeout: the pacer holds a power-on back
// for about two seconds to keep the reserve, four times the request
// timeout. The wait must not count against the timeout: the request goes
// through once the budget allows, instead of failing as a timeout and
// being retried as a network error.
func TestPacedRequestOutlastsRequestTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("paces a request in real time for about 2 s")
	}
	const timeout = 500 * time.Millisecond
	e := newFaultEnv(t, faultOptions{
		realClock: true,
		fake:      []hcloudtest.Option{hcloudtest.WithRateLimit(50, time.Second)},
		cluster:   []hcloudscale.Option{hcloudscale.WithRequestTimeout(timeout), hcloudscale.WithRateLimitReserve(5)},
		nodes:     []string{"0:3:cpx21:fsn1:plain"},
	})
	defer e.stop()
	id, err := e.api().AddServer(hcloudtest.ServerInfo{Name: "off", Status: hcloud.ServerStatusOff})
	if err != nil {
		t.Fatal(err)
	}
	client := e.c.Client()
	ctx := context.Background()
	// Other tools spent the budget down to the reserve; a read tells the
	// pacer (reads are not held back until the estimate reaches the
	// reserve plus 5% of the limit, and this one may wait for that).
	e.api().SetRateLimitRemaining(5)
	if _, _, err := client.Server.GetByID(ctx, id); err != nil {
		t.Fatalf("GetByID: %v", err)
	}
	waited := e.c.RateLimit().Waited
	start := time.Now()
	if _, _, err := client.Server.Poweron(ctx, &hcloud.Server{ID: id}); err != nil {
		t.Fatalf("Poweron after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	held := e.c.RateLimit().Waited - waited
	if held <= timeout {
		t.Errorf("the pacer held the power-on back for %s; want longer than the request timeout %s, or the test proves nothing", held, timeout)
	}
	if got := e.api().Count("POST /servers/{id}/actions/poweron"); got != 1 {
		t.Errorf("POST poweron sent %d times; want 1", got)
	}
	t.Logf("power-on held back %s by the pacer, request timeout %s", held.Round(time.Millisecond), timeout)
}
