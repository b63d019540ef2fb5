package pacer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
)

// Test429IsWaitedOut empties the bucket behind the pacer's back: the API
// answers 429, and the pacer waits until the reset header says one token
// is back, then sends the same body again.
func Test429IsWaitedOut(t *testing.T) {
	clk := newManualClock()
	srv := newBucketServer(clk, 100, 1)
	client, p, url := newTestPacer(t, srv, clk)
	mustSend(t, client, http.MethodGet, url, http.StatusOK) // the pacer believes 99 are left
	srv.spend(100)                                          // another tool spends them
	start := clk.Now()

	body := `{"name":"pool1-abc","server_type":"cx22"}`
	simulate(t, clk, p, 1, func(int) {
		if code, err := send(t.Context(), client, http.MethodPost, url+"/servers", []byte(body)); err != nil || code != http.StatusOK {
			t.Errorf("POST /servers = %d, %v; want 200", code, err)
		}
	})

	type sent struct {
		Status int
		Body   string
	}
	var got []sent
	for _, s := range srv.served()[1:] {
		got = append(got, sent{s.status, s.body})
	}
	want := []sent{{http.StatusTooManyRequests, body}, {http.StatusOK, body}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests the API saw (-want +got):\n%s", diff)
	}
	// The 429 says 0 of 100 left and full in 100 s: one token per second,
	// plus the header's rounding of up to a second spread over 100 tokens.
	waited := clk.Now().Sub(start)
	if lo, hi := time.Second, 1020*time.Millisecond; waited < lo || waited > hi {
		t.Errorf("re-sent after %v; want between %v and %v", waited, lo, hi)
	}
	s := p.Stats()
	if s.Got429 != 1 || s.Resent != 1 || s.Waited != waited {
		t.Errorf("Stats() = %+v; want Got429 1, Resent 1, Waited %v", s, waited)
	}
}

// always429 answers every request with an empty bucket.
type always429 struct {
	clock clock.Clock
	mu    sync.Mutex // guards n
	n     int
}

func (h *always429) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	setRateLimit(w.Header(), 100, 0, h.clock.Now().Add(100*time.Second))
	w.WriteHeader(http.StatusTooManyRequests)
}

func (h *always429) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Test429HandedBack lists when the pacer gives the 429 to the caller
// instead of waiting: the caller (hcloud-go) then sees rate_limit_exceeded.
func Test429HandedBack(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		timeout  time.Duration // real time, on the request context
		noRewind bool          // body without GetBody
		wantSent int
		wantWait time.Duration // one per token, up to 2% more for the header's rounding
	}{
		{name: "re-sent up to the maximum", opts: []Option{WithMaxRetries(2)}, wantSent: 3, wantWait: 2 * time.Second},
		{name: "no re-sends", opts: []Option{WithMaxRetries(0)}, wantSent: 1},
		{name: "body cannot be read again", noRewind: true, wantSent: 1},
		{name: "budget back after the maximum wait", opts: []Option{WithMaxWait(500 * time.Millisecond)}, wantSent: 1},
		{name: "budget back after the context deadline", timeout: 500 * time.Millisecond, wantSent: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			h := &always429{clock: clk}
			client, p, url := newTestPacer(t, h, clk, tt.opts...)
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			var body io.Reader = strings.NewReader(`{"name":"x"}`)
			if tt.noRewind {
				body = io.MultiReader(body) // not a type NewRequest knows: no GetBody
			}
			start := clk.Now()
			simulate(t, clk, p, 1, func(int) {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("POST: %v; want the 429 answer", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("POST = %d; want 429", resp.StatusCode)
				}
			})
			if got := h.count(); got != tt.wantSent {
				t.Errorf("API saw %d requests; want %d", got, tt.wantSent)
			}
			if got, hi := clk.Now().Sub(start), tt.wantWait*102/100; got < tt.wantWait || got > hi {
				t.Errorf("waited %v; want between %v and %v", got, tt.wantWait, hi)
			}
			if s := p.Stats(); s.Got429 != tt.wantSent || s.Resent != tt.wantSent-1 {
				t.Errorf("Stats() = %+v; want Got429 %d, Resent %d", s, tt.wantSent, tt.wantSent-1)
			}
		})
	}
}

// closeRecorder is a request body that remembers being closed.
type closeRecorder struct {
	io.Reader
	mu     sync.Mutex
	closed bool
}

func (c *closeRecorder) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *closeRecorder) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// TestCancelWhileHeldBack cancels a request the pacer holds back: it fails
// with the context's error, its body is closed as a RoundTripper must, and
// it never reaches the API.
func TestCancelWhileHeldBack(t *testing.T) {
	clk := newManualClock()
	srv := newBucketServer(clk, 100, 1)
	_, p, url := newTestPacer(t, srv, clk)
	client := &http.Client{Transport: p}
	srv.spend(99)
	mustSend(t, client, http.MethodGet, url, http.StatusOK) // learn the bucket is empty

	ctx, cancel := context.WithCancel(t.Context())
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.RoundTrip(req)
		done <- err
	}()
	if held, err := heldOrDone(p, done); !held {
		t.Fatalf("POST on an empty bucket: held = false, %v; want held back", err)
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip = %v; want an error wrapping context.Canceled", err)
	}
	if !body.isClosed() {
		t.Error("request body not closed after the failed RoundTrip")
	}
	if got := len(srv.served()); got != 1 {
		t.Errorf("API saw %d requests; want 1 (the cancelled one never sent)", got)
	}
	if s := p.Stats(); s.Waiting != 0 {
		t.Errorf("Stats().Waiting = %d after cancel; want 0", s.Waiting)
	}
}

// TestMaxWaitSendsIntoReserve: a request held back for the maximum wait is
// sent anyway; the reserve is a courtesy, the API decides.
func TestMaxWaitSendsIntoReserve(t *testing.T) {
	clk := newManualClock()
	srv := newBucketServer(clk, 100, 1)
	client, p, url := newTestPacer(t, srv, clk, WithMaxWait(3*time.Second))
	srv.spend(99)
	mustSend(t, client, http.MethodGet, url, http.StatusOK) // 0 left; the reserve of 5 is 6 s away
	start := clk.Now()
	simulate(t, clk, p, 1, func(int) {
		if code, err := send(t.Context(), client, http.MethodPost, url, nil); err != nil || code != http.StatusOK {
			t.Errorf("POST = %d, %v; want 200", code, err)
		}
	})
	if got, want := clk.Now().Sub(start), 3*time.Second; got != want {
		t.Errorf("sent after %v; want %v", got, want)
	}
	if s := p.Stats(); s.Overdue != 1 || s.Waits != 1 {
		t.Errorf("Stats() = %+v; want Overdue 1, Waits 1", s)
	}
}

// gate answers requests only when released, and counts how many wait.
type gate struct {
	headers bool          // send rate-limit headers
	release chan struct{} // closed to let requests through
	mu      sync.Mutex    // guards inside
	inside  int
}

func (g *gate) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	g.inside++
	g.mu.Unlock()
	<-g.release
	if g.headers {
		setRateLimit(w.Header(), 3600, 3000, time.Now().Add(600*time.Second))
	}
}

func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside
}

// TestUnknownBudget: until an answer tells the budget, requests go one at
// a time; if answers carry no rate-limit headers, requests are not paced.
func TestUnknownBudget(t *testing.T) {
	tests := []struct {
		name       string
		headers    bool
		warmUp     bool // one answer before the concurrent pair
		wantInside int  // requests the API holds at once
		wantHeld   int  // requests the pacer holds at once
	}{
		{name: "first request probes", headers: true, wantInside: 1, wantHeld: 1},
		{name: "known budget", headers: true, warmUp: true, wantInside: 2},
		{name: "no headers", warmUp: true, wantInside: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gate{headers: tt.headers, release: make(chan struct{})}
			client, p, url := newTestPacer(t, g, newManualClock())
			if tt.warmUp {
				close(g.release)
				mustSend(t, client, http.MethodGet, url, http.StatusOK)
				g.mu.Lock()
				g.inside, g.release = 0, make(chan struct{})
				g.mu.Unlock()
			}
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					if code, err := send(t.Context(), client, http.MethodGet, url, nil); err != nil || code != http.StatusOK {
						t.Errorf("GET = %d, %v; want 200", code, err)
					}
				})
			}
			waitFor(t, "both requests to arrive at the pacer or the API", func() bool {
				return g.waiting()+p.Stats().Waiting == 2
			})
			time.Sleep(10 * time.Millisecond) // a wrongly released request would arrive now
			gotInside, gotHeld := g.waiting(), p.Stats().Waiting
			close(g.release)
			wg.Wait()
			if gotInside != tt.wantInside || gotHeld != tt.wantHeld {
				t.Errorf("at the API %d, held by the pacer %d; want %d, %d", gotInside, gotHeld, tt.wantInside, tt.wantHeld)
			}
		})
	}
}
