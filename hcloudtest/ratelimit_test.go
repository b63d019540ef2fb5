package hcloudtest_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestRateLimitHeadersOnEveryResponse(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	calls := []struct {
		name string
		call func() (*hcloud.Response, error)
	}{
		{"list", func() (*hcloud.Response, error) {
			_, r, err := client.Server.List(ctx, hcloud.ServerListOpts{})
			return r, err
		}},
		{"not found", func() (*hcloud.Response, error) { _, r, err := client.Server.GetByID(ctx, 1); return r, err }},
		{"invalid", func() (*hcloud.Response, error) {
			_, r, err := client.Server.Create(ctx, basicCreateOpts("bad_name", nil))
			return r, err
		}},
	}
	for i, c := range calls {
		resp, _ := c.call()
		want := hcloud.Ratelimit{Limit: 3600, Remaining: 3600 - i - 1, Reset: epoch.Add(time.Duration(i+1) * time.Second)}
		if diff := cmp.Diff(want, resp.Meta.Ratelimit); diff != "" {
			t.Errorf("%s: rate limit (-want +got):\n%s", c.name, diff)
		}
	}
	if got := s.RateLimitRemaining(); got != 3600-len(calls) {
		t.Errorf("RateLimitRemaining = %d; want %d", got, 3600-len(calls))
	}
}

func TestRateLimitExhaustedAndRefilled(t *testing.T) {
	s, client, clock := newFake(t, hcloudtest.WithRateLimit(10, 2*time.Second))
	ctx := t.Context()
	s.SetRateLimitRemaining(1)
	if _, _, err := client.Server.List(ctx, hcloud.ServerListOpts{}); err != nil {
		t.Fatalf("last request of the bucket: %v", err)
	}
	_, resp, err := client.Server.List(ctx, hcloud.ServerListOpts{})
	if !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
		t.Fatalf("List on an empty bucket error = %v; want rate_limit_exceeded", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status = %d; want 429", resp.StatusCode)
	}
	if got, want := resp.Header.Get("RateLimit-Reset"), strconv.FormatInt(epoch.Add(20*time.Second).Unix(), 10); got != want {
		t.Errorf("RateLimit-Reset = %s; want %s (10 requests x 2 s)", got, want)
	}
	// hcloud-go retried the 429 five times; all were refused.
	if got := s.Count("GET /servers"); got != 1+6 {
		t.Errorf("GET /servers = %d; want 7", got)
	}

	clock.Advance(2 * time.Second)
	_, resp, err = client.Server.List(ctx, hcloud.ServerListOpts{})
	if err != nil {
		t.Fatalf("List after one refill: %v", err)
	}
	if resp.Meta.Ratelimit.Remaining != 0 {
		t.Errorf("remaining = %d; want 0", resp.Meta.Ratelimit.Remaining)
	}
	clock.Advance(time.Hour)
	if got := s.RateLimitRemaining(); got != 10 {
		t.Errorf("remaining after an hour = %d; want the full bucket of 10", got)
	}
}

func TestRateLimitDisabled(t *testing.T) {
	s, client, _ := newFake(t, hcloudtest.WithRateLimit(0, 0))
	for range 5 {
		_, resp, err := client.Server.List(t.Context(), hcloud.ServerListOpts{})
		if err != nil {
			t.Fatal(err)
		}
		// The API always sends the headers; turned off, the bucket is
		// full and stays so.
		if l, r := resp.Header.Get("RateLimit-Limit"), resp.Header.Get("RateLimit-Remaining"); l != "3600" || r != "3600" {
			t.Errorf("RateLimit-Limit, -Remaining = %q, %q; want a full bucket of 3600 when disabled", l, r)
		}
	}
	s.SetRateLimit(2, time.Second)
	for i := range 3 {
		_, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}) // the third one exhausts retries too
		if i < 2 && err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if i == 2 && !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
			t.Errorf("request %d error = %v; want rate_limit_exceeded", i, err)
		}
	}
}
