package actionwait

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// askedFor counts the logged GET /actions that asked for the action.
func (s *sim) askedFor(a *hcloud.Action) int {
	n := 0
	for _, r := range s.fake.Requests() {
		if r.Template == "GET /actions" && slices.Contains(r.Query["id"], itoa(a.ID)) {
			n++
		}
	}
	return n
}

// Polls do not wait for each other: while the first poll's request hangs
// (a connection that never answers), a Wait for another action is
// answered by the next poll, on schedule, and the hung request's action
// is not asked for again meanwhile. Once the request answers, its caller
// is woken too.
func TestWaiterHungPollHoldsBackOnlyItsActions(t *testing.T) {
	s := newSim(t, nil, nil, hcloudtest.WithActionDuration("create_server", time.Second))
	hold := s.fake.HoldRequest("GET /actions", 1)
	defer hold.Release()
	a := createRaw(t, s.client, "a")
	held := s.wait("", a)
	eventually(t, "the first poll's request to hang", func() bool {
		select {
		case <-hold.Arrived():
			return true
		default:
			s.clock.Step(simStep)
			return false
		}
	})

	b := createRaw(t, s.client, "b")
	free := s.wait("", b)
	// b is first polled after the prior; it finished by then.
	due := s.clock.Now().Add(PriorIntervals * DefaultPollInterval)
	start := s.clock.Now()
	deadline := time.Now().Add(10 * time.Second)
	var r waitResult
wait:
	for {
		select {
		case r = <-free:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Wait(b) still blocked after %s of the clock while a request of an earlier poll hangs",
				s.clock.Now().Sub(start))
		}
		s.clock.Step(simStep)
		time.Sleep(time.Millisecond)
	}
	if r.err != nil {
		t.Errorf("Wait(b) = %v; want nil", r.err)
	}
	if late := r.at.Sub(due); late > DefaultPollInterval+simStep {
		t.Errorf("Wait(b) returned %s after b's first poll was due; want within a poll interval", late)
	}
	select {
	case r := <-held:
		t.Fatalf("Wait(a) returned %v while its request hangs", r.err)
	default:
	}
	if n := s.askedFor(a); n != 0 {
		t.Errorf("%d more requests asked for a while its request hung; want none", n)
	}

	hold.Release()
	if errs, _ := s.run(held); errs[0] != nil {
		t.Errorf("Wait(a) after its request answered = %v; want nil", errs[0])
	}
	if n := s.askedFor(a); n != 1 {
		t.Errorf("%d requests asked for a; want 1, the one that hung", n)
	}
	checkGaps(t, s.pollStarts(), DefaultPollInterval)
}

// inFlightCheck passes List through to the fake and records a violation
// when a request asks for an action that another request on the wire
// asks for too, or for more than a page of them.
type inFlightCheck struct {
	api API

	mu         sync.Mutex
	inFlight   map[int64]bool
	violations []string
}

func (c *inFlightCheck) List(ctx context.Context, opts hcloud.ActionListOpts) ([]*hcloud.Action, *hcloud.Response, error) {
	c.mu.Lock()
	if len(opts.ID) > actionsPerRequest || opts.PerPage != actionsPerRequest {
		c.violations = append(c.violations, "a request for "+strconv.Itoa(len(opts.ID))+" actions, "+strconv.Itoa(opts.PerPage)+" per page")
	}
	for _, id := range opts.ID {
		if c.inFlight[id] {
			c.violations = append(c.violations, "action "+itoa(id)+" asked for by two requests at once")
		}
		c.inFlight[id] = true
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, id := range opts.ID {
			delete(c.inFlight, id)
		}
		c.mu.Unlock()
	}()
	return c.api.List(ctx, opts)
}

// TestWaiterPollsUnderRandomInterleavings runs many callers over many
// actions of random durations, some failing, through a random mix, seeded
// and logged, of hung requests (released after random times), failed
// requests, latency, callers giving up and more callers arriving. Run it
// with -race and -count.
//
// The invariant: no two requests on the wire ask for the same action; a
// request asks for at most a page (50); no two polls start less than a
// poll interval apart; every Wait returns, with nil when its actions
// succeeded, their errors when some failed, or its context's error when
// it gave up; and the waiter holds nothing once they all returned.
func TestWaiterPollsUnderRandomInterleavings(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 5))
	check := &inFlightCheck{inFlight: map[int64]bool{}}
	interval := 10 * time.Millisecond
	s := newSim(t, func(c *hcloud.Client) API { check.api = &c.Action; return check },
		[]Option{WithPollInterval(interval)})

	var actions []*hcloud.Action
	for i := range 60 + rng.IntN(90) {
		s.fake.SetActionDuration("create_server", time.Duration(rng.IntN(3000))*time.Millisecond)
		if rng.IntN(8) == 0 {
			s.fake.FailAction("create_server", "", "")
		}
		actions = append(actions, createRaw(t, s.client, "s-"+strconv.Itoa(i)))
	}
	s.fake.SetLatency(time.Duration(rng.IntN(3)) * time.Millisecond)

	type result struct {
		mine      []*hcloud.Action
		err       error
		cancelled bool
	}
	callers := 40 + rng.IntN(40)
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for range callers {
		mine := make([]*hcloud.Action, 1+rng.IntN(4))
		for i := range mine {
			mine[i] = actions[rng.IntN(len(actions))]
		}
		delay := time.Duration(rng.IntN(200)) * time.Millisecond
		giveUp := time.Duration(0)
		if rng.IntN(5) == 0 {
			giveUp = time.Duration(1+rng.IntN(300)) * time.Millisecond
		}
		class := []string{"", "cx23/fsn1"}[rng.IntN(2)]
		wg.Go(func() {
			time.Sleep(delay)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if giveUp > 0 {
				time.AfterFunc(giveUp, cancel)
			}
			results <- result{mine, s.w.WaitAs(ctx, class, mine...), giveUp > 0}
		})
	}
	// Hung and failing requests; each hold is released after a while.
	var holds []*hcloudtest.Hold
	for range 2 + rng.IntN(6) {
		hold := s.fake.HoldRequest("GET /actions", 1+rng.IntN(30))
		holds = append(holds, hold)
		after := time.Duration(1+rng.IntN(400)) * time.Millisecond
		wg.Go(func() {
			time.Sleep(after)
			hold.Release()
		})
	}
	for range rng.IntN(6) {
		s.fake.FailRequest("GET /actions", 1+rng.IntN(30), hcloudtest.RequestFault{Code: "server_error"})
	}
	stop := make(chan struct{})
	step := time.Duration(1+rng.IntN(50)) * time.Millisecond
	var clockWG sync.WaitGroup
	clockWG.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				s.clock.Step(step)
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Waits did not return after %s of the clock", s.clock.Now().Sub(epoch))
	}
	close(stop)
	clockWG.Wait()
	close(results)

	s.clock.Step(3 * time.Second) // actions nobody waited for finish too
	failed := map[int64]bool{}
	for _, a := range actions {
		got, _, err := s.client.Action.GetByID(t.Context(), a.ID)
		if err != nil || got == nil || got.Status == hcloud.ActionStatusRunning {
			t.Fatalf("action %d at the end: %+v, %v", a.ID, got, err)
		}
		failed[a.ID] = got.Status == hcloud.ActionStatusError
	}
	for r := range results {
		want := 0
		for i, a := range r.mine {
			// Wait counts an action once, however often it is given.
			if failed[a.ID] && !slices.ContainsFunc(r.mine[:i], func(b *hcloud.Action) bool { return b.ID == a.ID }) {
				want++
			}
		}
		var actErrs int
		for _, e := range unjoin(r.err) {
			var ae hcloud.ActionError
			if errors.As(e, &ae) {
				actErrs++
			}
		}
		switch {
		case r.cancelled && errors.Is(r.err, context.Canceled):
		case want == 0 && r.err != nil:
			t.Errorf("Wait(%v) = %v; want nil: its actions succeeded", ids(r.mine), r.err)
		case want > 0 && actErrs != want:
			t.Errorf("Wait(%v) = %v; want %d action errors", ids(r.mine), r.err, want)
		}
	}
	check.mu.Lock()
	for _, v := range check.violations {
		t.Error(v)
	}
	check.mu.Unlock()
	checkGaps(t, s.pollStarts(), interval)
	s.w.mu.Lock()
	if len(s.w.byID) != 0 {
		t.Errorf("the waiter still holds %d actions after every Wait returned", len(s.w.byID))
	}
	s.w.mu.Unlock()
	hung := 0
	for _, h := range holds {
		select {
		case <-h.Arrived():
			hung++
		default:
		}
	}
	t.Logf("%d actions, %d callers, %d requests, %d of them hung", len(actions), callers, s.fake.Count("GET /actions"), hung)
}

// unjoin returns the errors that errors.Join joined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func ids(actions []*hcloud.Action) []int64 {
	out := make([]int64, len(actions))
	for i, a := range actions {
		out[i] = a.ID
	}
	return out
}
