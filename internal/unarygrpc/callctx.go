package unarygrpc

import (
	"context"
	"sync"
	"time"
)

// inlineContext is the context of an inline call. An inline handler runs
// on the connection's reader and answers from memory, in microseconds;
// a context from context.WithTimeout would arm and stop a runtime timer
// on each of those calls, which costs more than many an answer. This
// context reports the call's deadline and makes the timer (or, without a
// deadline, the cancellable context) only when someone asks for Done;
// until then Err looks at the parent and the clock, and keeps the first
// error it finds.
//
// A reset of the stream cannot reach an inline call while it runs: the
// reader that would read the RST_STREAM is running the handler. The call
// ends (stop) when its answer is written or the stream ends; from then on
// Err is Canceled and Done closed, as with grpc-go's call contexts.
type inlineContext struct {
	context.Context           // the connection's, with the call's metadata
	deadline        time.Time // zero: none of its own

	mu     sync.Mutex
	made   context.Context // made by Done
	cancel context.CancelFunc
	ended  error // Err once it was not nil, or the call ended, unless made
}

// closedChan is the Done of a context that has ended before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (c *inlineContext) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

func (c *inlineContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made == nil {
		if c.ended == nil {
			c.ended = c.errNow()
		}
		if c.ended != nil {
			return closedChan
		}
		if c.deadline.IsZero() {
			c.made, c.cancel = context.WithCancel(c.Context)
		} else {
			c.made, c.cancel = context.WithDeadline(c.Context, c.deadline)
		}
	}
	return c.made.Done()
}

// Err is stable: once it is not nil, it stays what it was.
func (c *inlineContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made != nil {
		return c.made.Err()
	}
	if c.ended == nil {
		c.ended = c.errNow()
	}
	return c.ended
}

// Value is the made context's once Done has made it, so that a context
// derived from this one finds it (and its Done) as its parent to cancel
// with, rather than the connection's.
func (c *inlineContext) Value(key any) any {
	c.mu.Lock()
	made := c.made
	c.mu.Unlock()
	if made != nil {
		return made.Value(key)
	}
	return c.Context.Value(key)
}

// errNow is the error of a context nobody asked Done of, from its parent
// and the clock.
func (c *inlineContext) errNow() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// stop ends the call's context; it is the call's cancel function.
func (c *inlineContext) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		return
	}
	if c.ended == nil {
		c.ended = c.errNow()
		if c.ended == nil {
			c.ended = context.Canceled
		}
	}
}
