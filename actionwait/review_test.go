package actionwait

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// holdRequest holds every List request that asks for the held ID until
// release is closed (or the request's context ends), as a hung connection
// would; the others go through to the fake.
type holdRequest struct {
	api     API
	held    int64
	release chan struct{}

	mu      sync.Mutex
	holding int
}

func (h *holdRequest) List(ctx context.Context, opts hcloud.ActionListOpts) ([]*hcloud.Action, *hcloud.Response, error) {
	if slices.Contains(opts.ID, h.held) {
		h.mu.Lock()
		h.holding++
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return h.api.List(ctx, opts)
}

func (h *holdRequest) isHolding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding > 0
}

// The requests of one poll are independent: a caller whose actions were
// in an answered request returns at once, however long another request
// of the same poll hangs (up to pollTimeout).
func TestWaiterHungRequestHoldsBackNoOtherCaller(t *testing.T) {
	hold := &holdRequest{release: make(chan struct{})}
	s := newSim(t, func(c *hcloud.Client) API { hold.api = &c.Action; return hold }, nil,
		hcloudtest.WithActionDuration("create_server", time.Second))
	defer close(hold.release)
	var actions []*hcloud.Action
	for i := range actionsPerRequest + 1 {
		actions = append(actions, createRaw(t, s.client, "s-"+itoa(int64(i))))
	}
	// IDs are polled in order, 50 a request: the last is alone in the
	// second request, which hangs.
	hold.held = actions[actionsPerRequest].ID
	free := s.wait("", actions[:actionsPerRequest]...)
	held := s.wait("", actions[actionsPerRequest])
	eventually(t, "the poll to reach the held request", func() bool {
		if !hold.isHolding() {
			s.clock.Step(simStep)
			return false
		}
		return true
	})
	select {
	case r := <-free:
		if r.err != nil {
			t.Errorf("Wait(action of the answered request) = %v; want nil", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller whose actions were answered stayed blocked while another request of the poll hung")
	}
	select {
	case r := <-held:
		t.Errorf("Wait(action of the hung request) returned %v while its request hangs", r.err)
	default:
	}
}

// finishedBeforeStarted reports the finished actions as the API would with a
// clock that stepped back during them: finished before started.
type finishedBeforeStarted struct{ api API }

func (f finishedBeforeStarted) List(ctx context.Context, opts hcloud.ActionListOpts) ([]*hcloud.Action, *hcloud.Response, error) {
	actions, resp, err := f.api.List(ctx, opts)
	for _, a := range actions {
		if a.Status != hcloud.ActionStatusRunning {
			a.Finished = a.Started.Add(-time.Hour)
		}
	}
	return actions, resp, err
}

// An action whose API times are impossible (finished before started, as
// after a clock step on the API's side) teaches the waiter what it saw
// itself, not a duration of zero, which would have every later action of
// its kind polled at once.
func TestWaiterIgnoresImpossibleAPIDurations(t *testing.T) {
	s := newSim(t, func(c *hcloud.Client) API { return finishedBeforeStarted{&c.Action} }, nil,
		hcloudtest.WithActionDuration("create_server", 3*time.Second))
	if errs, _ := s.run(s.wait("cx23/fsn1", createRaw(t, s.client, "a"))); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for _, class := range []string{"cx23/fsn1", ""} {
		// Seen at the poll after the 2 s prior and the progress then:
		// 3 s at the earliest, later by how far the clock moved during
		// the poll.
		if got := s.w.Expected("create_server", class); got < 3*time.Second || got > 5*time.Second {
			t.Errorf("Expected(create_server, %q) = %s after a 3 s create reported as finished before it started; want about 3s, what the waiter saw", class, got)
		}
	}
}

// Close at a random moment, with polls in flight (every request takes a
// random few milliseconds) and callers arriving and giving up: every Wait
// returns promptly with nil, its context's error or ErrClosed, and
// no goroutine is left (goleak in TestMain).
func TestWaiterCloseWithPollsInFlight(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(itoa(int64(seed)), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			fake, client, clock, w := waiterEnv(t, hcloudtest.WithActionDuration("create_server", 50*time.Millisecond))
			fake.SetLatency(time.Duration(1+rng.IntN(5)) * time.Millisecond)
			var actions []*hcloud.Action
			for i := range 60 {
				actions = append(actions, createRaw(t, client, "s-"+itoa(int64(i))))
			}
			type result struct {
				err       error
				cancelled bool
			}
			results := make(chan result, 40)
			for range 40 {
				ctx, cancel := context.WithCancel(t.Context())
				cancelled := rng.IntN(4) == 0
				mine := []*hcloud.Action{actions[rng.IntN(len(actions))], actions[rng.IntN(len(actions))]}
				delay := time.Duration(rng.IntN(20)) * time.Millisecond
				giveUp := time.Duration(rng.IntN(5)) * time.Millisecond
				go func() {
					defer cancel()
					time.Sleep(delay)
					if cancelled {
						time.AfterFunc(giveUp, cancel)
					}
					results <- result{w.Wait(ctx, mine...), cancelled}
				}()
			}
			for range rng.IntN(10) {
				clock.Step(10 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
			w.Close()
			for range 40 {
				select {
				case r := <-results:
					switch {
					case r.err == nil, errors.Is(r.err, ErrClosed):
					case r.cancelled && errors.Is(r.err, context.Canceled):
					default:
						t.Errorf("Wait = %v (cancelled: %v); want nil, ErrClosed or its context's error", r.err, r.cancelled)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a Wait did not return after Close")
				}
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.byID) != 0 {
				t.Errorf("the closed waiter still holds %d actions", len(w.byID))
			}
		})
	}
}
