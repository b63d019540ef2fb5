package pacer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/utils/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestPacer serves h on loopback and returns a client that sends through
// a Pacer on clk, and the Pacer.
func newTestPacer(t *testing.T, h http.Handler, clk clock.Clock, opts ...Option) (*http.Client, *Pacer, string) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	p := New(ts.Client().Transport, append([]Option{WithClock(clk)}, opts...)...)
	return &http.Client{Transport: p}, p, ts.URL
}

// send sends one request and returns its status, or -1 with the error.
func send(ctx context.Context, c *http.Client, method, url string, body []byte) (int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body) // as hcloud-go does: GetBody is set
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return -1, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func mustSend(t *testing.T, c *http.Client, method, url string, want int) {
	t.Helper()
	if got, err := send(t.Context(), c, method, url, nil); err != nil || got != want {
		t.Fatalf("%s %s = %d, %v; want %d, nil", method, url, got, err, want)
	}
}

// TestSteadyLoadNeverEmptiesBucket is the central promise: more requests
// than the bucket holds, from several goroutines, and the API never says
// 429, while the pacer spends the budget at the refill rate, not slower.
func TestSteadyLoadNeverEmptiesBucket(t *testing.T) {
	const (
		limit    = 100
		workers  = 4
		each     = 75
		bgFloor  = 10 // default reserve 5% plus the background's 5%
		burst    = limit - bgFloor
		paced    = workers*each - burst
		perToken = time.Second
	)
	clk := newManualClock()
	srv := newBucketServer(clk, limit, 1)
	client, p, url := newTestPacer(t, srv, clk)
	start := clk.Now()

	var failed atomic.Int64
	simulate(t, clk, p, workers, func(int) {
		for range each {
			if code, err := send(t.Context(), client, http.MethodGet, url+"/servers", nil); err != nil || code != http.StatusOK {
				failed.Add(1)
			}
		}
	})

	log := srv.served()
	got429, minRemaining := 0, limit
	for _, s := range log {
		if s.status == http.StatusTooManyRequests {
			got429++
		}
		minRemaining = min(minRemaining, s.remaining)
	}
	if len(log) != workers*each || got429 != 0 || failed.Load() != 0 {
		t.Errorf("server saw %d requests, %d answered 429, %d failed; want %d, 0, 0", len(log), got429, failed.Load(), workers*each)
	}
	if minRemaining < bgFloor {
		t.Errorf("lowest RateLimit-Remaining = %d; want >= %d (the background reserve)", minRemaining, bgFloor)
	}
	// The paced part takes one refill per request; the estimate errs on
	// the slow side by the reset header's rounding and by requests in
	// flight, which may cost a few percent, not more.
	elapsed := clk.Now().Sub(start)
	t.Logf("%d requests in %v of simulated time; lowest RateLimit-Remaining %d; %+v", len(log), elapsed, minRemaining, p.Stats())
	if lo, hi := paced*perToken, paced*perToken*105/100; elapsed < lo || elapsed > hi {
		t.Errorf("%d requests took %v of simulated time; want between %v and %v", workers*each, elapsed, lo, hi)
	}
	// Someone waits all through the paced part.
	if s := p.Stats(); s.Got429 != 0 || s.Overdue != 0 || s.Waited < paced*perToken || s.Limit != limit {
		t.Errorf("Stats() = %+v; want Got429 0, Overdue 0, Waited >= %v, Limit %d", s, paced*perToken, limit)
	}
}

// TestForegroundGoesFirst queues background requests first and foreground
// ones after, on an empty bucket: creates and deletes must reach the API
// before the polls.
func TestForegroundGoesFirst(t *testing.T) {
	clk := newManualClock()
	srv := newBucketServer(clk, 100, 1)
	client, p, url := newTestPacer(t, srv, clk)
	mustSend(t, client, http.MethodGet, url, http.StatusOK) // learn the budget
	srv.spend(98)
	mustSend(t, client, http.MethodPost, url, http.StatusOK) // learn it is empty

	methods := []string{http.MethodGet, http.MethodGet, http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut}
	simulate(t, clk, p, len(methods), func(i int) {
		// Queue in the order of methods.
		waitFor(t, "earlier requests to queue", func() bool { return p.Stats().Waiting == i })
		if code, err := send(t.Context(), client, methods[i], url, nil); err != nil || code != http.StatusOK {
			t.Errorf("%s = %d, %v; want 200", methods[i], code, err)
		}
	})

	var got []string
	for _, s := range srv.served()[2:] {
		got = append(got, s.method)
	}
	want := []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodGet, http.MethodGet, http.MethodGet}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order the API saw (-want +got):\n%s", diff)
	}
}

// TestReserve checks which requests go at once for a given budget.
func TestReserve(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		remaining int
		opts      []Option
		method    string
		priority  Priority // set on the context unless Auto
		wantHeld  bool
	}{
		{name: "plenty of budget", limit: 100, remaining: 50, method: http.MethodGet},
		{name: "background above its reserve of 5%+5%", limit: 100, remaining: 11, method: http.MethodGet},
		{name: "background at its reserve", limit: 100, remaining: 10, method: http.MethodGet, wantHeld: true},
		{name: "foreground below the background reserve", limit: 100, remaining: 10, method: http.MethodPost},
		{name: "foreground above its reserve of 5%", limit: 100, remaining: 6, method: http.MethodDelete},
		{name: "foreground at its reserve", limit: 100, remaining: 5, method: http.MethodPost, wantHeld: true},
		{name: "GET marked foreground", limit: 100, remaining: 6, method: http.MethodGet, priority: Foreground},
		{name: "POST marked background", limit: 100, remaining: 6, method: http.MethodPost, priority: Background, wantHeld: true},
		{name: "default reserve scales with the limit", limit: 3600, remaining: 180, method: http.MethodPost, wantHeld: true},
		{name: "foreground above 5% of 3600", limit: 3600, remaining: 181, method: http.MethodPost},
		{name: "background at 10% of 3600", limit: 3600, remaining: 360, method: http.MethodGet, wantHeld: true},
		{name: "zero reserve spends the last token", limit: 100, remaining: 1, opts: []Option{WithReserve(0)}, method: http.MethodPost},
		{name: "zero reserve, empty bucket", limit: 100, remaining: 0, opts: []Option{WithReserve(0)}, method: http.MethodPost, wantHeld: true},
		{name: "zero reserve keeps background headroom", limit: 100, remaining: 5, opts: []Option{WithReserve(0)}, method: http.MethodGet, wantHeld: true},
		{name: "explicit reserve", limit: 3600, remaining: 21, opts: []Option{WithReserve(20)}, method: http.MethodPost},
		{name: "explicit reserve reached", limit: 3600, remaining: 20, opts: []Option{WithReserve(20)}, method: http.MethodPost, wantHeld: true},
		{name: "reserve above the bucket acts as bucket less one", limit: 100, remaining: 100, opts: []Option{WithReserve(500)}, method: http.MethodPost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				now := clk.Now()
				setRateLimit(w.Header(), tt.limit, tt.remaining, now.Add(time.Duration(tt.limit-tt.remaining)*time.Second))
			})
			client, p, url := newTestPacer(t, h, clk, tt.opts...)
			mustSend(t, client, http.MethodGet, url, http.StatusOK) // learn the budget

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.priority != Auto {
				ctx = WithPriority(ctx, tt.priority)
			}
			done := make(chan error, 1)
			go func() {
				_, err := send(ctx, client, tt.method, url, nil)
				done <- err
			}()
			held, err := heldOrDone(p, done)
			if err != nil {
				t.Fatalf("%s: %v", tt.method, err)
			}
			if held {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("held %s cancelled: error %v; want one wrapping context.Canceled", tt.method, err)
				}
			}
			if held != tt.wantHeld {
				t.Errorf("%s with %d of %d left: held back = %v; want %v", tt.method, tt.remaining, tt.limit, held, tt.wantHeld)
			}
		})
	}
}

// heldOrDone waits until one request is held back by p (true) or done
// delivers (false, with what it delivered).
func heldOrDone(p *Pacer, done <-chan error) (bool, error) {
	giveUp := time.After(5 * time.Second)
	for {
		select {
		case err := <-done:
			return false, err
		case <-giveUp:
			return false, errors.New("neither held back nor done after 5s")
		default:
		}
		if p.Stats().Waiting == 1 {
			return true, nil
		}
		time.Sleep(100 * time.Microsecond)
	}
}
