package pacer

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// bucketServer models the API's token bucket on a manual clock: every
// request takes a token, an empty bucket answers 429, and every answer
// carries the RateLimit headers the way Hetzner sends them.
type bucketServer struct {
	clock *manualClock
	limit int
	rate  float64 // tokens per second

	mu     sync.Mutex // guards the fields below
	tokens float64
	at     time.Time
	log    []served
}

// served is one request as the server saw it.
type served struct {
	at        time.Time
	method    string
	body      string
	status    int
	remaining int
}

func newBucketServer(clk *manualClock, limit int, rate float64) *bucketServer {
	return &bucketServer{clock: clk, limit: limit, rate: rate, tokens: float64(limit), at: clk.Now()}
}

func (s *bucketServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	now := s.clock.Now()
	s.refill(now)
	status := http.StatusOK
	if s.tokens < 1 {
		status = http.StatusTooManyRequests
	} else {
		s.tokens--
	}
	remaining := int(s.tokens)
	s.log = append(s.log, served{at: now, method: r.Method, body: string(body), status: status, remaining: remaining})
	setRateLimit(w.Header(), s.limit, remaining, s.fullAt(now))
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusTooManyRequests {
		fmt.Fprint(w, `{"error":{"code":"rate_limit_exceeded","message":"limit of 3600 requests per hour reached"}}`)
		return
	}
	fmt.Fprint(w, `{}`)
}

func (s *bucketServer) refill(now time.Time) {
	s.tokens = math.Min(float64(s.limit), s.tokens+s.rate*now.Sub(s.at).Seconds())
	s.at = now
}

// fullAt is when the bucket is full again, rounded up to whole seconds.
func (s *bucketServer) fullAt(now time.Time) time.Time {
	secs := float64(now.UnixNano())/1e9 + (float64(s.limit)-s.tokens)/s.rate
	return time.Unix(int64(math.Ceil(secs)), 0)
}

// spend empties the bucket, as another tool of the project would.
func (s *bucketServer) spend(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill(s.clock.Now())
	s.tokens = math.Max(0, s.tokens-float64(n))
}

func (s *bucketServer) served() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]served(nil), s.log...)
}

func setRateLimit(h http.Header, limit, remaining int, reset time.Time) {
	h.Set("RateLimit-Limit", strconv.Itoa(limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
}
