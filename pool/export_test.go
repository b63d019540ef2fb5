package pool

import "time"

// WithRetry sets how often a create request is sent after transient
// failures (attempts in total, DefaultCreateAttempts) and the first
// backoff (DefaultRetryBackoff, doubling).
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *options) {
		o.createAttempts = attempts
		o.retryBackoff = backoff
	}
}
