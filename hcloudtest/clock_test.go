package hcloudtest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestManualClock(t *testing.T) {
	c := hcloudtest.NewManualClock(epoch)
	if got := c.Now(); !got.Equal(epoch) {
		t.Fatalf("Now() = %v; want %v", got, epoch)
	}
	now := c.After(0)
	soon := c.After(time.Second)
	later := c.After(time.Minute)
	select {
	case <-now:
	default:
		t.Error("After(0) did not fire at once")
	}

	c.Advance(999 * time.Millisecond)
	select {
	case <-soon:
		t.Fatal("After(1s) fired after 999ms")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case got := <-soon:
		if want := epoch.Add(time.Second); !got.Equal(want) {
			t.Errorf("After(1s) sent %v; want %v", got, want)
		}
	default:
		t.Fatal("After(1s) did not fire at 1s")
	}
	c.Advance(-time.Hour) // ignored
	if got := c.Now(); !got.Equal(epoch.Add(time.Second)) {
		t.Errorf("Now() after a negative Advance = %v; want unchanged", got)
	}
	c.Set(epoch.Add(time.Hour))
	select {
	case <-later:
	default:
		t.Fatal("After(1m) did not fire on Set past it")
	}
}

func TestManualClockConcurrent(t *testing.T) {
	c := hcloudtest.NewManualClock(epoch)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				<-c.After(0)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), epoch.Add(800*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v; want %v", got, want)
	}
}
