package pacer

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// These tests drive the real hcloud-go client through a Pacer against the
// fake API, whose rate limiter models Hetzner's.

// newPacedClient returns an hcloud-go client that sends through a Pacer,
// with the pacer below hcloud-go's handlers as the root package wires it.
func newPacedClient(t *testing.T, s *hcloudtest.Server, opts ...Option) (*hcloud.Client, *Pacer) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := New(tr, opts...)
	return s.Client(hcloud.WithHTTPClient(&http.Client{Transport: p})), p
}

func count429(s *hcloudtest.Server) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// TestHcloudSteadyLoad: a bucket of 100 refilled once a second and 300
// listings from 4 goroutines, three times the bucket: the fake never
// answers 429, and the listings take the refill time, not more.
func TestHcloudSteadyLoad(t *testing.T) {
	const (
		limit   = 100
		workers = 4
		each    = 75
		paced   = workers*each - (limit - 10) // after a burst down to the background reserve
	)
	clk := newManualClock()
	s := hcloudtest.NewServer(hcloudtest.WithClock(clk), hcloudtest.WithRateLimit(limit, time.Second))
	t.Cleanup(s.Close)
	client, p := newPacedClient(t, s, WithClock(clk))
	start := clk.Now()

	var failed atomic.Int64
	simulate(t, clk, p, workers, func(int) {
		for range each {
			opts := hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "hcloud/node-group=pool1"}}
			if _, _, err := client.Server.List(t.Context(), opts); err != nil {
				t.Errorf("Server.List: %v", err)
				failed.Add(1)
			}
		}
	})

	if got, got429 := s.Count("GET /servers"), count429(s); got != workers*each || got429 != 0 || failed.Load() != 0 {
		t.Errorf("fake saw %d listings, answered %d with 429, %d failed; want %d, 0, 0", got, got429, failed.Load(), workers*each)
	}
	elapsed := clk.Now().Sub(start)
	if lo, hi := paced*time.Second, paced*time.Second*105/100; elapsed < lo || elapsed > hi {
		t.Errorf("listings took %v of the fake's time; want between %v and %v", elapsed, lo, hi)
	}
	if got := s.RateLimitRemaining(); got < 10 {
		t.Errorf("fake's bucket holds %d at the end; want >= 10 (the background reserve)", got)
	}
}

// TestHcloud429WaitedOut empties the fake's bucket behind the pacer's
// back, then creates a server: the fake answers 429, the pacer waits until
// the reset header says a token is back and re-sends the create, which
// succeeds; hcloud-go's own retry is never used.
func TestHcloud429WaitedOut(t *testing.T) {
	tests := []struct {
		name  string
		empty func(t *testing.T, s *hcloudtest.Server)
	}{
		{
			name:  "bucket emptied in the fake's state",
			empty: func(_ *testing.T, s *hcloudtest.Server) { s.SetRateLimitRemaining(0) },
		},
		{
			name: "bucket emptied by another client without a pacer",
			empty: func(t *testing.T, s *hcloudtest.Server) {
				other := s.Client()
				for s.RateLimitRemaining() > 0 {
					if _, _, err := other.Location.List(t.Context(), hcloud.LocationListOpts{}); err != nil {
						t.Fatalf("other client: %v", err)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			s := hcloudtest.NewServer(hcloudtest.WithClock(clk), hcloudtest.WithRateLimit(100, time.Second))
			t.Cleanup(s.Close)
			client, p := newPacedClient(t, s, WithClock(clk))
			if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
				t.Fatalf("Server.List: %v", err) // the pacer now believes 99 are left
			}
			tt.empty(t, s)
			s.ResetCounts()
			start := clk.Now()

			simulate(t, clk, p, 1, func(int) {
				_, _, err := client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
					Name:       "pool1-abc",
					ServerType: &hcloud.ServerType{Name: "cx23"},
					Image:      &hcloud.Image{Name: "ubuntu-24.04"},
					Location:   &hcloud.Location{Name: "fsn1"},
				})
				if err != nil {
					t.Errorf("Server.Create: %v", err)
				}
			})

			var got []int
			for _, r := range s.Requests() {
				got = append(got, r.Status)
			}
			if diff := cmp.Diff([]int{http.StatusTooManyRequests, http.StatusCreated}, got); diff != "" {
				t.Errorf("statuses of POST /servers (-want +got):\n%s", diff)
			}
			// 0 of 100 left, full in 100 s: one token a second, plus the
			// header's rounding spread over the bucket.
			if waited, lo, hi := clk.Now().Sub(start), time.Second, 1020*time.Millisecond; waited < lo || waited > hi {
				t.Errorf("create re-sent after %v; want between %v and %v", waited, lo, hi)
			}
			if servers, _ := s.Servers(""); len(servers) != 1 {
				t.Errorf("fake holds %d servers; want 1", len(servers))
			}
			if st := p.Stats(); st.Got429 != 1 || st.Resent != 1 {
				t.Errorf("Stats() = %+v; want Got429 1, Resent 1", st)
			}
		})
	}
}

// TestHcloud429RealClock runs the same on the system clock, with a small
// bucket refilled every 200 ms, to show the pacer's own timers work.
func TestHcloud429RealClock(t *testing.T) {
	const refill = 200 * time.Millisecond
	s := hcloudtest.NewServer(hcloudtest.WithRateLimit(10, refill))
	t.Cleanup(s.Close)
	client, _ := newPacedClient(t, s)
	if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
		t.Fatalf("Server.List: %v", err)
	}
	s.SetRateLimitRemaining(0)
	s.ResetCounts()

	start := time.Now()
	if _, err := client.Server.Delete(t.Context(), &hcloud.Server{ID: 42}); !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Fatalf("Server.Delete(42) = %v; want not_found after waiting out the 429", err)
	}
	waited := time.Since(start)

	var got []int
	for _, r := range s.Requests() {
		got = append(got, r.Status)
	}
	if diff := cmp.Diff([]int{http.StatusTooManyRequests, http.StatusNotFound}, got); diff != "" {
		t.Errorf("statuses of DELETE /servers/42 (-want +got):\n%s", diff)
	}
	// The reset header is in whole seconds: over a 2 s bucket that rounds
	// the refill estimate down by up to a half, so one token takes 200 to
	// 400 ms; hcloud-go's own retry would have taken 1 ms here. The upper
	// bound leaves room for a loaded machine (CI runs every package at
	// once on two cores); the lower bound is what shows the wait.
	if lo, hi := refill, 2*refill+1500*time.Millisecond; waited < lo || waited > hi {
		t.Errorf("delete answered after %v; want between %v and %v", waited, lo, hi)
	}
}
