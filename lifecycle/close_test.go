package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The invariant: once Close has returned, no goroutine of the Controller
// runs, and none starts (a drain, or the watch of an old server's
// delete, that a step starts while Close waits). Steps, which start
// them, run beside Close at random points; each goroutine outlives the
// cancel a little, so that Close has something to wait for.
func TestNoGoroutineStartsOnceCloseWaits(t *testing.T) {
	for i := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		c := &Controller{ctx: ctx, cancel: cancel}
		var running, late atomic.Int32
		var closed atomic.Bool
		var starters sync.WaitGroup
		for range 2 {
			starters.Go(func() {
				for j := 0; j < 50; j++ {
					c.mu.Lock()
					c.goLocked(func() {
						if closed.Load() {
							late.Add(1)
						}
						running.Add(1)
						defer running.Add(-1)
						<-c.ctx.Done()
						time.Sleep(time.Microsecond)
					})
					c.mu.Unlock()
				}
			})
		}
		if i%2 == 0 {
			time.Sleep(time.Duration(i%7) * time.Microsecond)
		}
		c.Close()
		closed.Store(true)
		if n := running.Load(); n != 0 {
			t.Fatalf("iteration %d: %d goroutines run after Close returned", i, n)
		}
		starters.Wait()
		if n := late.Load(); n != 0 {
			t.Fatalf("iteration %d: %d goroutines started after Close returned", i, n)
		}
	}
}
