package hcloudscale_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// clockEnv is a Cluster and the fake API on one fake clock: nothing that
// either of them waits for happens until the test steps the clock.
type clockEnv struct {
	t     *testing.T
	ctx   context.Context // bounds the test, so that a bug fails instead of hanging
	clock *testingclock.FakeClock
	api   *hcloudtest.Server
	c     *hcloudscale.Cluster
}

func newClockEnv(t *testing.T, fake ...hcloudtest.Option) *clockEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	clock := testingclock.NewFakeClock(faultEpoch)
	p := newProject(t, append([]hcloudtest.Option{hcloudtest.WithClock(clock)}, fake...)...)
	e := &clockEnv{t: t, ctx: ctx, clock: clock, api: p.api}
	cfg := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	c, err := hcloudscale.New(ctx, cfg, fastClient(), hcloudscale.WithClock(clock), hcloudscale.WithRateLimitReserve(5))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		// Flows still running end on Close; their waits on the clock end
		// with their context.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	e.c = c
	return e
}

// until yields until cond holds, without moving the clock.
func (e *clockEnv) until(what string, cond func() bool) {
	e.t.Helper()
	for !cond() {
		if e.ctx.Err() != nil {
			e.t.Fatalf("timed out waiting for %s (fake clock at %s)", what, e.clock.Now().Sub(faultEpoch))
		}
		runtime.Gosched()
	}
}

// drive steps the clock by step whenever something waits on it, until
// cond holds.
func (e *clockEnv) drive(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	for !cond() {
		if e.ctx.Err() != nil {
			e.t.Fatalf("timed out driving the clock until %s (fake clock at %s)", what, e.clock.Now().Sub(faultEpoch))
		}
		if e.clock.HasWaiters() {
			e.clock.Step(step)
		}
		runtime.Gosched()
	}
}

// elapsed is how far the test has moved the clock.
func (e *clockEnv) elapsed() time.Duration { return e.clock.Since(faultEpoch) }

// The action waiter polls on the Cluster's clock: a scale-up completes
// only as the clock moves, and then with a few polls, not one per step.
func TestClockDrivesScaleUp(t *testing.T) {
	e := newClockEnv(t)
	workers := e.c.Pool("workers")
	if err := workers.IncreaseSize(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.until("the waiter to wait for the create", func() bool {
		return e.api.Count("POST /servers") == 1 && e.clock.HasWaiters()
	})
	if polls := e.api.Count("GET /actions"); polls != 0 {
		t.Errorf("GET /actions sent %d times before the clock moved; want 0", polls)
	}
	e.drive("the server runs", 100*time.Millisecond, func() bool { return workers.Status().Running == 1 })
	if polls := e.api.Count("GET /actions"); polls == 0 || polls > 10 {
		t.Errorf("GET /actions sent %d times over %s of the clock; want 1 to 10", polls, e.elapsed())
	}
	if e.elapsed() < hcloudscale.DefaultPollInterval {
		t.Errorf("the scale-up took %s of the clock; want at least one poll interval", e.elapsed())
	}
}

// The server listing and the memory of an unavailable offering expire by
// the Cluster's clock.
func TestClockExpiresListingAndOffering(t *testing.T) {
	e := newClockEnv(t)
	lists := e.api.Count("GET /servers")
	if err := e.c.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.api.Count("GET /servers"); got != lists {
		t.Errorf("Refresh within the listing's TTL sent %d listings; want 0", got-lists)
	}
	e.clock.Step(2 * hcloudscale.DefaultListTTL)
	if err := e.c.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.api.Count("GET /servers"); got != lists+1 {
		t.Errorf("Refresh after the listing's TTL sent %d listings; want 1", got-lists)
	}

	// A capacity error marks the offering unavailable for its TTL.
	dedicated := e.c.Pool("dedicated")
	e.api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: string(hcloud.ErrorCodeResourceUnavailable)})
	if err := dedicated.IncreaseSize(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.until("the capacity error to mark the offering", func() bool { return len(dedicated.Status().Unavailable) == 1 })
	if err := dedicated.IncreaseSize(e.ctx, 1); !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Fatalf("IncreaseSize within the mark's TTL = %v; want ErrOfferingUnavailable", err)
	}
	e.clock.Step(pool.DefaultUnavailableTTL)
	if err := dedicated.IncreaseSize(e.ctx, 1); err != nil {
		t.Fatalf("IncreaseSize after the mark's TTL: %v", err)
	}
	e.drive("the server runs", 100*time.Millisecond, func() bool { return dedicated.Status().Running == 1 })
	if got := e.api.Count("POST /servers"); got != 2 {
		t.Errorf("POST /servers sent %d times; want 2 (the failed one and the one after the TTL)", got)
	}
}

// A create request that failed is sent again after the pool's backoff on
// the Cluster's clock, not on the wall clock.
func TestClockTimesRetryBackoff(t *testing.T) {
	e := newClockEnv(t)
	e.api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "server_error"})
	workers := e.c.Pool("workers")
	if err := workers.IncreaseSize(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.until("the backoff after the failed create", func() bool {
		return e.api.Count("POST /servers") == 1 && e.clock.HasWaiters()
	})
	e.clock.Step(time.Second - time.Millisecond) // the pool's first backoff: 1 s
	if got := e.api.Count("POST /servers"); got != 1 {
		t.Fatalf("POST /servers sent %d times before the backoff passed; want 1", got)
	}
	e.clock.Step(time.Millisecond)
	e.until("the second create request", func() bool { return e.api.Count("POST /servers") == 2 })
	e.drive("the server runs", 100*time.Millisecond, func() bool { return workers.Status().Running == 1 })
	if got := e.api.Count("POST /servers"); got != 2 {
		t.Errorf("POST /servers sent %d times; want 2", got)
	}
}

// The pacer holds a request back on the Cluster's clock until the fake's
// bucket, refilled on the same clock, is above the reserve again.
func TestClockPacesRequests(t *testing.T) {
	e := newClockEnv(t)
	var ids []int64
	for _, name := range []string{"off-1", "off-2"} {
		id, err := e.api.AddServer(hcloudtest.ServerInfo{Name: name, Status: hcloud.ServerStatusOff})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	client := e.c.Client()
	// Other tools left one request above the reserve of 5; the first
	// power-on spends it and tells the pacer.
	e.api.SetRateLimitRemaining(6)
	if _, _, err := client.Server.Poweron(e.ctx, &hcloud.Server{ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := client.Server.Poweron(e.ctx, &hcloud.Server{ID: ids[1]})
		done <- err
	}()
	e.until("the pacer to hold the second power-on back", e.clock.HasWaiters)
	if got := e.api.Count("POST /servers/{id}/actions/poweron"); got != 1 {
		t.Fatalf("POST poweron sent %d times while the budget is at the reserve; want 1", got)
	}
	e.drive("the second power-on is sent", 100*time.Millisecond, func() bool {
		return e.api.Count("POST /servers/{id}/actions/poweron") == 2
	})
	if err := <-done; err != nil {
		t.Fatalf("second Poweron: %v", err)
	}
	rl := e.c.RateLimit()
	if rl.Waited < hcloudtest.DefaultRateRefill || rl.Waited >= time.Minute {
		t.Errorf("RateLimit().Waited = %s; want at least one refill (%s) of the clock, under the pacer's maximum wait", rl.Waited, hcloudtest.DefaultRateRefill)
	}
}
