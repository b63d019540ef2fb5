package pool

import (
	"context"
	"time"
)

// retry calls try until it succeeds, says not to try again, or attempts
// calls have been made, and returns try's last error. Between two calls it
// waits on the pool's clock, defaultRetryBackoff (or the pool's setting)
// at first and twice as long each time after. A context that ends during
// a wait ends the retries: the error of the last call is returned, with
// stopped holding ctx's error.
func (p *Pool) retry(ctx context.Context, attempts int, try func(attempt int) (again bool, err error)) (err, stopped error) {
	backoff := p.opts.retryBackoff
	for attempt := 1; ; attempt++ {
		again, err := try(attempt)
		if err == nil || !again || attempt >= attempts {
			return err, nil
		}
		if stopped := p.sleep(ctx, backoff); stopped != nil {
			return err, stopped
		}
		backoff *= 2
	}
}

// sleep waits d on the pool's clock, or until ctx ends.
func (p *Pool) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := p.opts.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
