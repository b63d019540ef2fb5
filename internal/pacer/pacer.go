package pacer

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// class is a queue of waiting requests. Lower classes go first.
type class int

const (
	classResend     class = iota // answered 429, waiting for one token
	classForeground              // Foreground priority
	classBackground              // Background priority
	numClasses
)

func classOf(p Priority) class {
	if p == Background {
		return classBackground
	}
	return classForeground
}

// Pacer is an [http.RoundTripper] that spends the Hetzner Cloud API's
// rate-limit budget carefully. See the package documentation for how.
// A Pacer is safe for concurrent use and starts no goroutines.
type Pacer struct {
	next       http.RoundTripper
	clock      clock.Clock
	log        *zap.Logger
	reserve    int // -1: percentage of the limit
	maxWait    time.Duration
	maxRetries int

	// mu guards everything below.
	mu       sync.Mutex
	b        bucket
	unpaced  bool   // the first answer had no rate-limit headers: send freely until one has
	probing  bool   // a request is in flight while the bucket is unknown
	inflight int    // requests sent and not yet answered
	sent     uint64 // requests sent so far
	queues   [numClasses][]uint64
	ticket   uint64
	// changed is closed and replaced whenever a waiting request may have
	// become sendable: a request left a queue or an answer came back.
	changed chan struct{}
	stats   Stats
}

var _ http.RoundTripper = (*Pacer)(nil)

// New returns a Pacer that sends requests through next
// ([http.DefaultTransport] if nil).
func New(next http.RoundTripper, opts ...Option) *Pacer {
	if next == nil {
		next = http.DefaultTransport
	}
	p := &Pacer{
		next:       next,
		clock:      clock.RealClock{},
		log:        zap.NewNop(),
		reserve:    -1,
		maxWait:    DefaultMaxWait,
		maxRetries: DefaultMaxRetries,
		changed:    make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// RoundTrip sends req once the budget allows it, and re-sends it after a
// 429 once the budget is back. It fails only when the request context ends
// while the request is held back; the error then wraps the context's error.
func (p *Pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var deadline time.Time
	if p.maxWait > 0 {
		deadline = p.clock.Now().Add(p.maxWait)
	}
	c := classOf(PriorityOf(req))
	r := req
	for resent := 0; ; resent++ {
		waited, flight, err := p.acquire(ctx, c, deadline)
		if err != nil {
			// A RoundTripper closes the body, even on errors.
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, fmt.Errorf("pacer: waiting for rate-limit budget to send %s %s: %w", req.Method, req.URL.Path, err)
		}
		if waited > 0 {
			if ce := p.log.Check(zap.DebugLevel, "held back for rate-limit budget"); ce != nil {
				ce.Write(zap.String("method", req.Method), zap.String("path", req.URL.Path),
					zap.Stringer("priority", PriorityOf(req)), zap.Duration("waited", waited))
			}
		}
		resp, err := p.next.RoundTrip(r)
		p.observe(resp, flight)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		again, ok := p.resendable(ctx, req, resent, deadline)
		if !ok {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		r, c = again, classResend
	}
}

// resendable decides whether a request answered with 429 is waited out and
// re-sent, and returns the copy to send. It says no when the budget is not
// expected back before the request would have to give up anyway, so that
// the caller gets the 429 at once instead of after a useless wait.
func (p *Pacer) resendable(ctx context.Context, req *http.Request, resent int, deadline time.Time) (*http.Request, bool) {
	p.mu.Lock()
	p.stats.Got429++
	now := p.clock.Now()
	var at time.Time
	if p.b.known {
		// One token for each re-send queued ahead, and one for this one.
		at = p.b.readyAt(float64(len(p.queues[classResend])), now)
	}
	p.mu.Unlock()

	log := p.log.With(zap.String("method", req.Method), zap.String("path", req.URL.Path), zap.Int("resent", resent))
	// Context deadlines are in real time, the pacer's clock need not be.
	ctxDeadline, hasCtxDeadline := ctx.Deadline()
	switch {
	case resent >= p.maxRetries:
		log.Warn("rate limit exceeded; handing the 429 to the caller after the maximum re-sends", zap.Int("max_retries", p.maxRetries))
		return nil, false
	case at.IsZero():
		log.Warn("rate limit exceeded; no rate-limit headers to time a re-send by")
		return nil, false
	case !deadline.IsZero() && at.After(deadline), hasCtxDeadline && at.Sub(now) > time.Until(ctxDeadline):
		log.Warn("rate limit exceeded; budget not back before the request's deadline", zap.Time("budget_at", at))
		return nil, false
	}
	again, ok := rewind(req)
	if !ok {
		log.Warn("rate limit exceeded; request body cannot be sent again (no GetBody)")
		return nil, false
	}
	log.Warn("rate limit exceeded; re-sending once the budget is back", zap.Duration("wait", at.Sub(now)))
	p.mu.Lock()
	p.stats.Resent++
	p.mu.Unlock()
	return again, true
}

// rewind returns a copy of req with a fresh body.
func rewind(req *http.Request) (*http.Request, bool) {
	r := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	r.Body = body
	return r, true
}

// flight is what the pacer knows about one request on its way.
type flight struct {
	seq      uint64 // value of Pacer.sent when it was sent
	overlaps int    // requests in flight when it was sent
}

// acquire waits until a request of class c may be sent, and takes its
// token. It returns how long it waited.
func (p *Pacer) acquire(ctx context.Context, c class, deadline time.Time) (time.Duration, flight, error) {
	if err := ctx.Err(); err != nil {
		return 0, flight{}, err
	}
	p.mu.Lock()
	p.ticket++
	id := p.ticket
	p.queues[c] = append(p.queues[c], id)
	start := p.clock.Now()
	for {
		now := p.clock.Now()
		wake, ok := p.sendable(c, id, now)
		overdue := !ok && !deadline.IsZero() && !now.Before(deadline)
		if ok || overdue {
			f := p.take(c, id)
			waited := now.Sub(start)
			if waited > 0 {
				p.stats.Waits++
				p.stats.Waited += waited
			}
			if overdue {
				p.stats.Overdue++
			}
			p.mu.Unlock()
			if overdue {
				p.log.Info("request held back for the maximum wait; sending it into the reserve", zap.Duration("waited", waited))
			}
			return waited, f, nil
		}
		if !deadline.IsZero() && (wake.IsZero() || deadline.Before(wake)) {
			wake = deadline
		}
		var timer clock.Timer
		var fired <-chan time.Time
		if !wake.IsZero() {
			timer = p.clock.NewTimer(wake.Sub(now))
			fired = timer.C()
		}
		changed := p.changed
		p.mu.Unlock()

		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-changed:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		p.mu.Lock()
		if err != nil {
			p.dequeue(c, id)
			if waited := p.clock.Now().Sub(start); waited > 0 {
				p.stats.Waits++
				p.stats.Waited += waited
			}
			p.broadcast()
			p.mu.Unlock()
			return 0, flight{}, err
		}
	}
}

// sendable reports whether request id of class c may be sent now, and if
// not, when to look again (zero: when something changes). p.mu must be
// held.
func (p *Pacer) sendable(c class, id uint64, now time.Time) (time.Time, bool) {
	if !p.b.known {
		if p.unpaced {
			return time.Time{}, true
		}
		// Until an answer tells the budget, one request at a time, so that
		// a burst at start-up cannot empty a bucket that is nearly empty.
		if p.probing {
			return time.Time{}, false
		}
		p.probing = true
		return time.Time{}, true
	}
	if p.queues[c][0] != id {
		return time.Time{}, false
	}
	for k := range c {
		if len(p.queues[k]) > 0 {
			return time.Time{}, false
		}
	}
	at := p.b.readyAt(p.floor(c), now)
	if at.IsZero() || at.After(now) {
		return at, false
	}
	return at, true
}

// floor returns how many tokens class c leaves in the bucket. p.mu must be
// held.
func (p *Pacer) floor(c class) float64 {
	limit := p.b.limit
	share := max(1, (limit*reservePercent+99)/100)
	reserve := p.reserve
	if reserve < 0 {
		reserve = share
	}
	var f int
	switch c {
	case classResend:
		f = 0
	case classForeground:
		f = reserve
	default:
		f = reserve + share
	}
	return float64(max(0, min(f, limit-1)))
}

// take removes request id from its queue and charges its token. p.mu must
// be held.
func (p *Pacer) take(c class, id uint64) flight {
	p.dequeue(c, id)
	f := flight{seq: p.sent + 1, overlaps: p.inflight}
	p.sent++
	p.inflight++
	if p.b.known {
		p.b.tokens--
	}
	p.broadcast()
	return f
}

func (p *Pacer) dequeue(c class, id uint64) {
	if i := slices.Index(p.queues[c], id); i >= 0 {
		p.queues[c] = slices.Delete(p.queues[c], i, i+1)
	}
}

// broadcast wakes every waiting request to look again. p.mu must be held.
func (p *Pacer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// observe updates the estimate from the answer to request f; resp is nil
// when the request failed without one.
func (p *Pacer) observe(resp *http.Response, f flight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	p.inflight--
	p.probing = false
	if resp != nil {
		if rl, ok := parseRateLimit(resp.Header); ok {
			// The API may have served any request that overlapped this
			// one after it, and answers can arrive out of order, so every
			// overlapping request is taken from the reported remaining.
			// That errs on the side of waiting; the next answer corrects it.
			p.b.observe(rl, now, f.overlaps+int(p.sent-f.seq))
		} else if !p.b.known {
			p.unpaced = true
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			if p.b.known {
				// The bucket is empty whatever the estimate says.
				p.b.advance(now)
				p.b.tokens = math.Min(p.b.tokens, -float64(p.inflight))
			}
			if d, ok := parseRetryAfter(resp.Header); ok {
				p.b.notBefore = now.Add(d)
			}
		}
	}
	p.broadcast()
}

// Stats returns a snapshot of the pacer's estimate and counters.
func (p *Pacer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	p.b.advance(p.clock.Now())
	s.Limit, s.Remaining, s.Reset = p.b.limit, p.b.remaining, p.b.reset
	s.Estimated = max(0, int(math.Floor(p.b.tokens)))
	for _, q := range p.queues {
		s.Waiting += len(q)
	}
	return s
}
