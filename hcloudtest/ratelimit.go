package hcloudtest

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// rateLimiter is a token bucket modelled on the Hetzner API's: limit
// requests, refilled by one every refill on the server's clock. It is
// guarded by Server.mu.
type rateLimiter struct {
	limit  int
	refill time.Duration
	tokens float64
	last   time.Time
}

func newRateLimiter(limit int, refill time.Duration, now time.Time) *rateLimiter {
	return &rateLimiter{limit: limit, refill: refill, tokens: float64(limit), last: now}
}

func (l *rateLimiter) enabled() bool { return l.limit > 0 }

func (l *rateLimiter) refillTo(now time.Time) {
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = math.Min(float64(l.limit), l.tokens+float64(elapsed)/float64(l.refill))
	}
	l.last = now
}

// take spends one request if the bucket has one and sets the RateLimit
// headers in both cases. Turned off, the limiter still sends the headers,
// as the API always does, for a bucket of [DefaultRateLimit] that never
// empties.
func (l *rateLimiter) take(now time.Time, h http.Header) bool {
	if !l.enabled() {
		h.Set("RateLimit-Limit", strconv.Itoa(DefaultRateLimit))
		h.Set("RateLimit-Remaining", strconv.Itoa(DefaultRateLimit))
		h.Set("RateLimit-Reset", strconv.FormatInt(now.Unix(), 10))
		return true
	}
	l.refillTo(now)
	ok := l.tokens >= 1
	if ok {
		l.tokens--
	}
	remaining := int(math.Floor(l.tokens))
	missing := float64(l.limit) - l.tokens
	reset := now.Add(time.Duration(math.Ceil(missing * float64(l.refill))))
	h.Set("RateLimit-Limit", strconv.Itoa(l.limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	return ok
}

// SetRateLimit changes the bucket size and refill interval at run time and
// fills the bucket. A limit of zero or less turns the limiter off.
func (s *Server) SetRateLimit(limit int, refillEvery time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if refillEvery <= 0 {
		refillEvery = DefaultRateRefill
	}
	s.st.limiter = newRateLimiter(limit, refillEvery, s.cfg.clock.Now())
}

// SetRateLimitRemaining sets how many requests are left in the bucket now,
// so a test can reach an empty bucket without spending it.
func (s *Server) SetRateLimitRemaining(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.st.limiter
	l.refillTo(s.cfg.clock.Now())
	l.tokens = float64(min(max(n, 0), l.limit))
}

// RateLimitRemaining reports how many requests the bucket holds now.
func (s *Server) RateLimitRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.st.limiter
	if !l.enabled() {
		return 0
	}
	l.refillTo(s.cfg.clock.Now())
	return int(math.Floor(l.tokens))
}
