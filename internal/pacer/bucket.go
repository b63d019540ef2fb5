package pacer

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// The rate-limit headers of the Hetzner Cloud API, sent with every answer.
const (
	headerLimit     = "RateLimit-Limit"     // bucket size
	headerRemaining = "RateLimit-Remaining" // tokens left
	headerReset     = "RateLimit-Reset"     // unix seconds when the bucket is full again
	headerRetry     = "Retry-After"         // seconds; not sent by Hetzner today, honoured if it ever is
)

// defaultRate is the refill rate assumed until the headers tell otherwise:
// Hetzner refills one request per second.
const defaultRate = 1.0

// maxReadySeconds caps how far ahead readyAt looks: a day.
const maxReadySeconds = 24 * 60 * 60

// rateLimit is what one response says about the bucket.
type rateLimit struct {
	limit     int
	remaining int
	reset     time.Time
}

// parseRateLimit reads the rate-limit headers. It reports false unless all
// three are present and sane, so that an answer from something in front of
// the API (a proxy's 502) never distorts the estimate.
func parseRateLimit(h http.Header) (rateLimit, bool) {
	limit, err1 := strconv.Atoi(h.Get(headerLimit))
	remaining, err2 := strconv.Atoi(h.Get(headerRemaining))
	reset, err3 := strconv.ParseInt(h.Get(headerReset), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit <= 0 || remaining < 0 || remaining > limit {
		return rateLimit{}, false
	}
	return rateLimit{limit: limit, remaining: remaining, reset: time.Unix(reset, 0)}, true
}

// parseRetryAfter reads a Retry-After header given in seconds.
func parseRetryAfter(h http.Header) (time.Duration, bool) {
	s, err := strconv.Atoi(h.Get(headerRetry))
	if err != nil || s < 0 {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

// bucket is the local estimate of the API's token bucket between answers.
// It is not safe for concurrent use; Pacer.mu guards it.
type bucket struct {
	known  bool      // an answer with rate-limit headers has been seen
	limit  int       // last RateLimit-Limit
	tokens float64   // estimated tokens at time at; negative while requests are owed
	at     time.Time // when tokens was last brought up to date
	rate   float64   // estimated refill in tokens per second

	remaining int       // last RateLimit-Remaining, for Stats
	reset     time.Time // last RateLimit-Reset, for Stats
	notBefore time.Time // from Retry-After: nothing is sent earlier
}

// advance refills the estimate up to now.
func (b *bucket) advance(now time.Time) {
	if !b.known || !now.After(b.at) {
		return
	}
	b.tokens = math.Min(float64(b.limit), b.tokens+b.rate*now.Sub(b.at).Seconds())
	b.at = now
}

// readyAt returns when the estimate will hold more than floor tokens, so
// that one request can be sent without going below floor. The zero time
// means never: floor is at or above the bucket size.
func (b *bucket) readyAt(floor float64, now time.Time) time.Time {
	b.advance(now)
	if floor+1 > float64(b.limit) {
		return time.Time{}
	}
	at := now
	if need := floor + 1 - b.tokens; need > 0 {
		// A reset far in the future (a skewed clock) gives a tiny rate;
		// the cap keeps the duration from overflowing. WithMaxWait bounds
		// the wait long before.
		secs := math.Min(need/b.rate, maxReadySeconds)
		at = now.Add(time.Duration(math.Ceil(secs * float64(time.Second))))
	}
	if at.Before(b.notBefore) {
		at = b.notBefore
	}
	return at
}

// observe replaces the estimate with what an answer reports, less
// uncounted: requests the API may have served after it had counted
// remaining.
func (b *bucket) observe(rl rateLimit, now time.Time, uncounted int) {
	if !b.known {
		b.rate = defaultRate
	}
	b.known = true
	b.limit = rl.limit
	b.remaining = rl.remaining
	b.reset = rl.reset
	b.tokens = float64(rl.remaining - uncounted)
	b.at = now
	// The reset header has whole-second resolution; the extra second keeps
	// the estimated rate at or below the real one however the API rounds.
	// A reset that has passed although tokens are missing means the clocks
	// disagree; the last estimate is kept then.
	if missing := rl.limit - rl.remaining; missing > 0 {
		if secs := rl.reset.Sub(now).Seconds(); secs >= 0 {
			b.rate = float64(missing) / (secs + 1)
		}
	}
}
