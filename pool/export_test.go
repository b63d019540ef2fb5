package pool

import "time"

// The options only tests set.

// WithRetry sets how often a create request is sent after transient
// failures (attempts in total, defaultCreateAttempts) and the first
// backoff (defaultRetryBackoff, doubling).
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *options) {
		o.createAttempts = attempts
		o.retryBackoff = backoff
	}
}
