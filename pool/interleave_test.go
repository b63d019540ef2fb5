package pool

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// interleavings runs a test's actors at random moments, from a seed the
// test logs, until halt.
type interleavings struct {
	rngMu  sync.Mutex // guards rng
	rng    *rand.Rand
	maxGap int // milliseconds between two runs of an actor, at most
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newInterleavings(t *testing.T, stream uint64, maxGap time.Duration) *interleavings {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	return &interleavings{rng: rand.New(rand.NewPCG(uint64(seed), stream)), maxGap: int(maxGap / time.Millisecond), stop: make(chan struct{})}
}

func (il *interleavings) intn(n int) int {
	il.rngMu.Lock()
	defer il.rngMu.Unlock()
	return il.rng.IntN(n)
}

// every runs what again and again, 1 ms to maxGap apart, until halt.
func (il *interleavings) every(what func()) {
	il.wg.Go(func() {
		for {
			select {
			case <-il.stop:
				return
			case <-time.After(time.Duration(1+il.intn(il.maxGap)) * time.Millisecond):
				what()
			}
		}
	})
}

// halt stops the actors and waits for them.
func (il *interleavings) halt() {
	close(il.stop)
	il.wg.Wait()
}
