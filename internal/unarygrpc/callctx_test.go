package unarygrpc

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The inline context keeps the contract of context.Context whichever of
// Done, the deadline, the parent's end and the call's end comes first.
func TestInlineContext(t *testing.T) {
	type key struct{}
	parentOf := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	}
	t.Run("deadline passes, nobody asked Done", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		dl := time.Now().Add(20 * time.Millisecond)
		c := &inlineContext{Context: parent, deadline: dl}
		if got, ok := c.Deadline(); !ok || !got.Equal(dl) {
			t.Fatalf("Deadline = %v, %v; want %v, true", got, ok, dl)
		}
		if c.Err() != nil || c.Value(key{}) != "v" {
			t.Fatalf("before the deadline: Err %v, Value %v", c.Err(), c.Value(key{}))
		}
		time.Sleep(30 * time.Millisecond)
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline = %v", c.Err())
		}
		if !isClosed(c.Done()) {
			t.Fatal("Done after the deadline is not closed")
		}
		c.stop()
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Fatalf("after stop: Err %v, Cause %v; want the deadline's", c.Err(), context.Cause(c))
		}
	})
	t.Run("Done asked before the deadline closes at it", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		c := &inlineContext{Context: parent, deadline: time.Now().Add(30 * time.Millisecond)}
		done := c.Done()
		if isClosed(done) || c.Err() != nil {
			t.Fatal("closed before the deadline")
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close at the deadline")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", c.Err())
		}
		c.stop()
	})
	t.Run("stop before the deadline", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		c := &inlineContext{Context: parent, deadline: time.Now().Add(20 * time.Millisecond)}
		c.stop()
		if !errors.Is(c.Err(), context.Canceled) || !isClosed(c.Done()) {
			t.Fatalf("after stop: Err %v, Done closed %v", c.Err(), isClosed(c.Done()))
		}
		time.Sleep(30 * time.Millisecond)
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after stop and then the deadline = %v, want Canceled", c.Err())
		}
	})
	t.Run("stop after Done", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		c := &inlineContext{Context: parent, deadline: time.Now().Add(time.Hour)}
		done := c.Done()
		c.stop()
		if !isClosed(done) || !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("after stop: Err %v, Done closed %v", c.Err(), isClosed(done))
		}
	})
	t.Run("the parent ends", func(t *testing.T) {
		for _, askDone := range []bool{false, true} {
			parent, cancel := parentOf()
			c := &inlineContext{Context: parent}
			if _, ok := c.Deadline(); ok {
				t.Fatal("a deadline without one")
			}
			var done <-chan struct{}
			if askDone {
				done = c.Done()
			}
			cancel()
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("Err after the parent's cancel = %v", c.Err())
			}
			if askDone {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("Done did not close with the parent")
				}
			} else if !isClosed(c.Done()) {
				t.Fatal("Done asked after the parent's cancel is not closed")
			}
			c.stop()
		}
	})
	t.Run("Err stays the deadline's when the parent ends after it", func(t *testing.T) {
		for _, askDone := range []bool{false, true} {
			parent, cancel := parentOf()
			c := &inlineContext{Context: parent, deadline: time.Now().Add(20 * time.Millisecond)}
			if askDone {
				<-c.Done()
			} else {
				time.Sleep(30 * time.Millisecond)
			}
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Fatalf("askDone=%v: Err after the deadline = %v", askDone, c.Err())
			}
			cancel()
			c.stop()
			if !errors.Is(c.Err(), context.DeadlineExceeded) || !isClosed(c.Done()) {
				t.Errorf("askDone=%v: after the parent's cancel and stop: Err %v, Done closed %v; want the deadline's, closed",
					askDone, c.Err(), isClosed(c.Done()))
			}
		}
	})
	t.Run("children cancel with it, without a goroutine each", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		c := &inlineContext{Context: parent, deadline: time.Now().Add(time.Hour)}
		before := runtime.NumGoroutine()
		var children []context.Context
		for range 20 {
			child, cancelChild := context.WithCancel(c)
			defer cancelChild()
			children = append(children, child)
		}
		if extra := runtime.NumGoroutine() - before; extra > 2 {
			t.Errorf("20 children started %d goroutines", extra)
		}
		c.stop()
		for _, child := range children {
			select {
			case <-child.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a child did not end with its parent")
			}
			if !errors.Is(child.Err(), context.Canceled) {
				t.Fatalf("child Err = %v", child.Err())
			}
		}
	})
	t.Run("AfterFunc and concurrent Done", func(t *testing.T) {
		parent, cancel := parentOf()
		defer cancel()
		c := &inlineContext{Context: parent, deadline: time.Now().Add(time.Hour)}
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 8)
		for i := range chans {
			wg.Go(func() { chans[i] = c.Done() })
		}
		wg.Go(func() { _ = c.Err() })
		wg.Wait()
		for _, ch := range chans {
			if ch != chans[0] {
				t.Fatal("Done returned different channels")
			}
		}
		c.stop()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run after stop")
		}
	})
}
