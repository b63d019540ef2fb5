package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// viewInvariants checks what must hold in every view of a pool: the
// target never exceeds max, and the target is exactly the instances that
// are not being deleted, so that a server is counted once, whether
// through its claim or as a listed server. It returns the view's target.
func viewInvariants(p *Pool) (int, error) {
	ins, st := p.view()
	live := 0
	seen := map[string]bool{}
	names := map[string]bool{}
	for _, in := range ins {
		if seen[in.ID] || names[in.Name] {
			return 0, fmt.Errorf("instance %s (%s) listed twice in %+v", in.ID, in.Name, ins)
		}
		seen[in.ID], names[in.Name] = true, true
		if in.State != Deleting {
			live++
		}
	}
	switch {
	case st.Target > p.MaxSize():
		return 0, fmt.Errorf("target %d above max %d: %+v", st.Target, p.MaxSize(), ins)
	case st.Target != live:
		return 0, fmt.Errorf("target %d, but %d instances not deleting: %+v", st.Target, live, ins)
	}
	return st.Target, nil
}

// TestViewWhileClaimsSucceed fills a pool to max and, while the claims
// turn into servers, keeps asking for one more from 8 goroutines and
// reading the target, the instances and the status, with listings in
// between. Each claim is published as its server and then dropped: a
// reader that counted the server zero times would see the target dip
// below max, and IncreaseSize would pass the max.
func TestViewWhileClaimsSucceed(t *testing.T) {
	const maxSize = 60
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", 0, maxSize))
	ctx := t.Context()
	if err := p.IncreaseSize(ctx, maxSize); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var accepted, reads atomic.Int64
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := p.IncreaseSize(ctx, 1)
				switch {
				case err == nil:
					accepted.Add(1)
				case !errors.Is(err, ErrAboveMax):
					report(fmt.Errorf("IncreaseSize(1): %w", err))
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				reads.Add(1)
				if got := p.TargetSize(); got != maxSize {
					report(fmt.Errorf("TargetSize() = %d; want %d throughout", got, maxSize))
				}
				if target, err := viewInvariants(p); err != nil {
					report(err)
				} else if target != maxSize {
					report(fmt.Errorf("view target %d; want %d throughout", target, maxSize))
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := e.cache.Refresh(ctx); err != nil {
				report(fmt.Errorf("Refresh: %w", err))
			}
		}
	})
	e.settle(p)
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d IncreaseSize(1) calls succeeded at max; want 0", n)
	}
	if got := len(e.servers("workers")); got != maxSize {
		t.Errorf("fake holds %d servers; want %d", got, maxSize)
	}
	if got := countStates(p.Instances()); got["running"] != maxSize || len(got) != 1 {
		t.Errorf("instances by state = %v; want %d running", got, maxSize)
	}
	t.Logf("%d reads while %d claims succeeded", reads.Load(), maxSize)
}

// TestViewStress runs random interleavings of IncreaseSize,
// DeleteInstances, DecreaseTargetSize, listings and clock steps from
// concurrent workers, and checks after every step that the view holds
// (viewInvariants) and that the target did not drop while no delete or
// decrease ran since the previous check. At the end the fake holds exactly
// the servers the pool reports, none leaked, none twice.
func TestViewStress(t *testing.T) {
	const (
		workers = 4
		steps   = 300 // per worker
		minSize = 2
		maxSize = 8
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	e := newEnv(t, envOptions{})
	p := e.newPool(poolConfig("workers", minSize, maxSize))
	ctx := t.Context()

	// started and finished count the deletes and decreases begun and
	// ended. A view is quiet when none ran at its start and none began
	// until its end: finished read before started, both equal, and
	// started unchanged after the view. Between two quiet views with the
	// same count nothing shrank the pool, so the target may not drop.
	var started, finished atomic.Int64
	var mu sync.Mutex // serialises checks; guards last, lastSeq
	last, lastSeq := -1, int64(-1)
	check := func() error {
		// Views are compared in the order they are taken: one check at
		// a time, or a view taken earlier could be compared last.
		mu.Lock()
		defer mu.Unlock()
		f0 := finished.Load()
		seq0 := started.Load()
		target, err := viewInvariants(p)
		if err != nil {
			return err
		}
		seq1 := started.Load()
		quiet := f0 == seq0 && seq0 == seq1
		if quiet && seq0 == lastSeq && target < last {
			return fmt.Errorf("target dropped from %d to %d with no delete or decrease", last, target)
		}
		if quiet {
			last, lastSeq = target, seq0
		} else {
			lastSeq = -1
		}
		return nil
	}
	shrink := func(fn func() error) error {
		started.Add(1)
		defer finished.Add(1)
		return fn()
	}

	var ops atomic.Int64
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for range steps {
				var err error
				switch op := rng.IntN(10); {
				case op < 3:
					err = p.IncreaseSize(ctx, 1+rng.IntN(3))
					if errors.Is(err, ErrAboveMax) {
						err = nil
					}
				case op < 5:
					ins := p.Instances()
					if len(ins) == 0 {
						break
					}
					id := ins[rng.IntN(len(ins))].ID
					err = shrink(func() error { return p.DeleteInstances(ctx, []string{id}) })
					// Another worker may have deleted it since; a
					// server that is gone is not the pool's any more.
					if errors.Is(err, ErrBelowMin) || errors.Is(err, ErrNotInPool) {
						err = nil
					}
				case op < 6:
					err = shrink(func() error { return p.DecreaseTargetSize(ctx, -1) })
				case op < 7:
					_, err = e.cache.Refresh(ctx)
				default:
					e.clock.Step(time.Duration(rng.IntN(2000)) * time.Millisecond)
				}
				ops.Add(1)
				if err != nil {
					errc <- fmt.Errorf("seed %d: %w", seed, err)
					return
				}
				if err := check(); err != nil {
					errc <- fmt.Errorf("seed %d, after %d steps: %w", seed, ops.Load(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	e.settle(p)
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	servers := e.servers("workers")
	byID := map[int64]hcloud.ServerStatus{}
	for _, s := range servers {
		byID[s.ID] = s.Status
	}
	st := p.Status()
	if st.Target != len(servers) || st.Running != len(servers) || st.Target > maxSize {
		t.Errorf("settled: status %+v; the fake holds %d servers (max %d)", st, len(servers), maxSize)
	}
	for _, in := range p.Instances() {
		if status, ok := byID[in.ServerID]; !ok || status != hcloud.ServerStatusRunning {
			t.Errorf("instance %+v: the fake has it %t, %s", in, ok, status)
		}
	}
	t.Logf("%d steps, %d servers at the end", ops.Load(), len(servers))
}
