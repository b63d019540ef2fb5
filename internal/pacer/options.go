package pacer

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Defaults of a [Pacer].
const (
	// DefaultMaxWait bounds how long a request is held back.
	DefaultMaxWait = time.Minute
	// DefaultMaxRetries bounds how often a request answered with 429 is
	// re-sent by the pacer before the 429 is handed to the caller.
	DefaultMaxRetries = 3
	// reservePercent is the default reserve, and the extra reserve of
	// background requests, in percent of RateLimit-Limit: 180 and 180 more
	// of Hetzner's default 3600.
	reservePercent = 5
)

// Option configures a [Pacer].
type Option func(*Pacer)

// WithReserve keeps n requests of the bucket for the other tools that share
// the project's budget (cloud controller manager, CSI driver, Terraform):
// foreground requests are held back once the estimated remaining budget is
// down to n, background requests once it is down to n plus 5% of
// RateLimit-Limit (at least one). The default n is 5% of RateLimit-Limit,
// rounded up, which scales with limits Hetzner has raised. A negative n
// counts as 0. Reserves at or above the bucket size act as the bucket size
// less one, so that the pacer still makes progress.
func WithReserve(n int) Option {
	return func(p *Pacer) { p.reserve = max(n, 0) }
}

// WithClock replaces the system clock, which tells the time and times
// the waits for budget; a k8s.io/utils/clock/testing.FakeClock makes waits
// of minutes take no real time.
func WithClock(c clock.Clock) Option {
	return func(p *Pacer) {
		if c != nil {
			p.clock = c
		}
	}
}

// WithLogger sets the logger; the pacer logs under the name "pacer". The
// default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(p *Pacer) {
		if l != nil {
			p.log = l.Named("pacer")
		}
	}
}

// WithMaxWait bounds the time one request spends held back by the pacer,
// [DefaultMaxWait] by default. A request still held back then is sent
// anyway, dipping into the reserve (the API is the judge; the worst case
// is a 429 the pacer waits out), and counted in [Stats].Overdue. A 429 is
// re-sent only if the budget is expected back before this bound and before
// the request context's deadline; otherwise the 429 goes to the caller at
// once. d <= 0 removes the bound; the request context still applies.
func WithMaxWait(d time.Duration) Option {
	return func(p *Pacer) { p.maxWait = max(d, 0) }
}

// WithMaxRetries bounds how often one request answered with 429 is re-sent
// by the pacer, [DefaultMaxRetries] by default. A negative n counts as 0,
// which hands every 429 to the caller.
func WithMaxRetries(n int) Option {
	return func(p *Pacer) { p.maxRetries = max(n, 0) }
}
