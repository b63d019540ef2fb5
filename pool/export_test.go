package pool

import "time"

// The options only tests set.

// WithUnavailableTTL sets how long a capacity error makes IncreaseSize
// fail at once (DefaultUnavailableTTL). Zero disables the memory.
func WithUnavailableTTL(d time.Duration) Option {
	return func(o *options) { o.unavailableTTL = d }
}
