package actionwait

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/metrics"
)

// simStep is how far a sim moves the fake clock per millisecond of wall
// time. Times a sim measures are late by up to a step (more when the
// machine is busy); poll starts are exact, the waiter reads them itself.
const simStep = 25 * time.Millisecond

// sim is a waiter with the default poll interval whose clock is the fake
// API's fake clock, so that action durations and the waiter's schedule
// are on one time line; it records when every poll starts.
type sim struct {
	t      *testing.T
	fake   *hcloudtest.Server
	client *hcloud.Client
	clock  *testingclock.FakeClock
	w      *Waiter

	mu    sync.Mutex // guards polls
	polls []time.Time
}

func newSim(t *testing.T, api func(*hcloud.Client) API, wopts []Option, opts ...hcloudtest.Option) *sim {
	t.Helper()
	clock := testingclock.NewFakeClock(epoch)
	fake := hcloudtest.NewServer(append([]hcloudtest.Option{hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0)}, opts...)...)
	t.Cleanup(fake.Close)
	s := &sim{t: t, fake: fake, client: fake.Client(), clock: clock}
	var actions API = &s.client.Action
	if api != nil {
		actions = api(s.client)
	}
	hook := func(w *Waiter) {
		w.pollHook = func(at time.Time) {
			s.mu.Lock()
			s.polls = append(s.polls, at)
			s.mu.Unlock()
		}
	}
	s.w = New(actions, append([]Option{WithClock(clock), hook}, wopts...)...)
	t.Cleanup(s.w.Close)
	return s
}

// waitResult is what a Wait returned, and the clock's time then.
type waitResult struct {
	err error
	at  time.Time
}

// wait starts a Wait for the actions and returns once the waiter holds
// them, so that they are waited for from the clock's current time.
func (s *sim) wait(class string, actions ...*hcloud.Action) <-chan waitResult {
	s.t.Helper()
	ch := make(chan waitResult, 1)
	go func() {
		err := s.w.WaitAs(s.t.Context(), class, actions...)
		ch <- waitResult{err, s.clock.Now()}
	}()
	eventually(s.t, "the waiter to hold the actions", func() bool {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		for _, a := range actions {
			if t := s.w.byID[a.ID]; t == nil || len(t.calls) == 0 {
				return false
			}
		}
		return true
	})
	return ch
}

// run advances the clock until every Wait has returned and reports their
// errors and the clock's time when each returned.
func (s *sim) run(chs ...<-chan waitResult) ([]error, []time.Time) {
	s.t.Helper()
	errs := make([]error, len(chs))
	at := make([]time.Time, len(chs))
	left := len(chs)
	deadline := time.Now().Add(time.Minute)
	for left > 0 {
		for i, ch := range chs {
			if ch == nil {
				continue
			}
			select {
			case r := <-ch:
				errs[i], at[i] = r.err, r.at
				chs[i] = nil
				left--
			default:
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d Waits did not return by %s", left, s.clock.Now().Sub(epoch))
		}
		s.clock.Step(simStep)
		time.Sleep(time.Millisecond)
	}
	return errs, at
}

func (s *sim) pollStarts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.polls...)
}

// finished returns when the API finished the action.
func (s *sim) finished(a *hcloud.Action) time.Time {
	s.t.Helper()
	got, _, err := s.client.Action.GetByID(s.t.Context(), a.ID)
	if err != nil || got == nil || got.Finished.IsZero() {
		s.t.Fatalf("action %d: %v, %v", a.ID, got, err)
	}
	return got.Finished
}

// addServers adds n running servers and returns them.
func (s *sim) addServers(prefix string, n int) []*hcloud.Server {
	s.t.Helper()
	out := make([]*hcloud.Server, n)
	for i := range out {
		id, err := s.fake.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("%s-%d", prefix, i), Status: hcloud.ServerStatusRunning})
		if err != nil {
			s.t.Fatal(err)
		}
		out[i] = &hcloud.Server{ID: id}
	}
	return out
}

// noProgress hides the progress the fake reports, as an API that reports
// none would.
type noProgress struct{ api API }

func (n noProgress) List(ctx context.Context, opts hcloud.ActionListOpts) ([]*hcloud.Action, *hcloud.Response, error) {
	actions, resp, err := n.api.List(ctx, opts)
	for _, a := range actions {
		if a.Status == hcloud.ActionStatusRunning {
			a.Progress = 0
		}
	}
	return actions, resp, err
}

// checkGaps fails if two polls started less than one poll interval apart.
func checkGaps(t *testing.T, polls []time.Time, interval time.Duration) {
	t.Helper()
	for i := 1; i < len(polls); i++ {
		if gap := polls[i].Sub(polls[i-1]); gap < interval {
			t.Errorf("polls %d and %d started %s apart; want at least the poll interval %s", i-1, i, gap, interval)
		}
	}
}

// An action that runs far longer than every action the waiter learned
// from is still seen soon after it finishes: overdue, it is polled at
// least every MaxGapIntervals, whether or not the API reports progress.
func TestWaiterSeesASlowActionWithinTheBound(t *testing.T) {
	for _, tt := range []struct {
		name     string
		api      func(*hcloud.Client) API
		maxPolls int
	}{
		// From 2 s to 60 s, polls at most MaxGapIntervals apart: 12 when
		// progress shows how far it is, 15 when it must guess.
		{"progress reported", nil, 13},
		{"no progress", func(c *hcloud.Client) API { return noProgress{&c.Action} }, 16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, tt.api, nil, hcloudtest.WithActionDuration("create_server", 2*time.Second))
			for i := range 3 {
				if errs, _ := s.run(s.wait("", createRaw(t, s.client, "learn-"+itoa(int64(i))))); errs[0] != nil {
					t.Fatal(errs[0])
				}
			}
			if got := s.w.Expected("create_server", ""); got != 2*time.Second {
				t.Fatalf("Expected(create_server) = %s after three 2 s creates; want 2s", got)
			}

			s.fake.SetActionDuration("create_server", time.Minute)
			slow := createRaw(t, s.client, "slow")
			before := len(s.pollStarts())
			errs, at := s.run(s.wait("", slow))
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			bound := (MaxGapIntervals + 1) * DefaultPollInterval
			if late := at[0].Sub(s.finished(slow)); late > bound+2*simStep {
				t.Errorf("a 60 s action after 2 s ones was seen %s after it finished; want at most %s", late, bound)
			}
			polls := s.pollStarts()
			if n := len(polls) - before; n > tt.maxPolls {
				t.Errorf("the 60 s action took %d polls; want at most %d", n, tt.maxPolls)
			}
			checkGaps(t, polls, DefaultPollInterval)
		})
	}
}

// Actions of three commands with learned durations of 1, 4 and 9 s,
// started together, cost one poll each group, each when it is done.
func TestWaiterMixedDurationsOnePollPerGroup(t *testing.T) {
	s := newSim(t, nil, nil,
		hcloudtest.WithActionDuration("stop_server", time.Second),
		hcloudtest.WithActionDuration("delete_server", 4*time.Second),
		hcloudtest.WithActionDuration("create_server", 9*time.Second))
	ctx := t.Context()
	const n = 20
	off := s.addServers("off", n+1)
	del := s.addServers("del", n+1)
	start := func(i int) (poweroff, deleteAction, create *hcloud.Action) {
		a, _, err := s.client.Server.Poweroff(ctx, off[i])
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := s.client.Server.DeleteWithResult(ctx, del[i])
		if err != nil {
			t.Fatal(err)
		}
		return a, res.Action, createRaw(t, s.client, "new-"+itoa(int64(i)))
	}
	// One of each to learn from.
	a, b, c := start(n)
	if errs, _ := s.run(s.wait("", a), s.wait("", b), s.wait("", c)); errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatal(errs)
	}
	for cmd, want := range map[string]time.Duration{"stop_server": time.Second, "delete_server": 4 * time.Second, "create_server": 9 * time.Second} {
		if got := s.w.Expected(cmd, ""); got != want {
			t.Fatalf("Expected(%s) = %s; want %s", cmd, got, want)
		}
	}

	s.fake.ResetCounts()
	var chs []<-chan waitResult
	var actions []*hcloud.Action
	for i := range n {
		a, b, c := start(i)
		actions = append(actions, a, b, c)
		chs = append(chs, s.wait("", a), s.wait("", b), s.wait("", c))
	}
	errs, at := s.run(chs...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("Wait %d: %v", i, err)
		}
		if late := at[i].Sub(s.finished(actions[i])); late > DefaultPollInterval+2*simStep {
			t.Errorf("%s seen %s after it finished; want at most %s", actions[i].Command, late, DefaultPollInterval)
		}
	}
	if got := s.fake.Count("GET /actions"); got != 3 {
		t.Errorf("GET /actions = %d for three groups of %d actions finishing at 1, 4 and 9 s; want 3", got, n)
	}
}

// Under random actions (durations from nothing to 6 s, started at random
// times, in three classes) no two polls start less than one poll interval
// apart, every Wait returns, and none is seen later than the bound (or,
// if it was faster than expected, than its expected duration).
func TestWaiterNeverPollsFasterThanTheInterval(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 16))
			s := newSim(t, nil, nil)
			var chs []<-chan waitResult
			var actions []*hcloud.Action
			var expected []time.Duration
			for i := range 40 {
				s.fake.SetActionDuration("create_server", time.Duration(rng.Int64N(int64(6*time.Second))))
				a := createRaw(t, s.client, "s-"+itoa(int64(i)))
				class := []string{"cx23/fsn1", "cx33/nbg1", ""}[rng.IntN(3)]
				actions = append(actions, a)
				// An action faster than expected is first polled when
				// expected, with others due up to an interval later.
				expected = append(expected, s.w.Expected("create_server", class)+DefaultPollInterval)
				chs = append(chs, s.wait(class, a))
				for range rng.IntN(20) {
					s.clock.Step(simStep)
					time.Sleep(time.Millisecond)
				}
			}
			errs, at := s.run(chs...)
			bound := (MaxGapIntervals + 1) * DefaultPollInterval
			for i, err := range errs {
				if err != nil {
					t.Errorf("Wait %d: %v", i, err)
				}
				want := max(bound, expected[i])
				if late := at[i].Sub(s.finished(actions[i])); late > want+2*simStep {
					t.Errorf("action %d seen %s after it finished; want at most %s", i, late, want)
				}
			}
			checkGaps(t, s.pollStarts(), DefaultPollInterval)
		})
	}
}

// Many callers share each poll: 120 actions cost ⌈120/50⌉ requests per
// poll, each with at most 50 IDs and per_page 50.
func TestWaiterBatchesAllCallers(t *testing.T) {
	// 3 s creates: the first poll (after the 2 s prior) finds them
	// running, 66% done; the next, a second later, finds them done.
	s := newSim(t, nil, nil, hcloudtest.WithActionDuration("create_server", 3*time.Second))
	const callers = 120
	chs := make([]<-chan waitResult, callers)
	for i := range chs {
		chs[i] = s.wait("", createRaw(t, s.client, "s-"+itoa(int64(i))))
	}
	errs, _ := s.run(chs...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := s.fake.Count("GET /actions"); got != 6 {
		t.Errorf("GET /actions = %d for %d actions polled twice; want 6", got, callers)
	}
	for _, r := range s.fake.Requests() {
		if r.Template == "GET /actions" && (len(r.Query["id"]) > actionsPerRequest || r.Query.Get("per_page") != "50") {
			t.Errorf("GET /actions with %d ids and per_page %q; want at most 50 and per_page 50", len(r.Query["id"]), r.Query.Get("per_page"))
		}
	}
}

// Durations are learned per command and per class, the class figure
// preferred; nothing learned means the prior. Failed actions teach
// nothing. The metrics show the durations and the polls per action.
func TestWaiterLearnsPerCommandAndClass(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, nil, []Option{withMetrics(m)}, hcloudtest.WithActionDuration("create_server", 3*time.Second))
	if errs, _ := s.run(s.wait("cx23/fsn1", createRaw(t, s.client, "small"))); errs[0] != nil {
		t.Fatal(errs[0])
	}
	s.fake.SetActionDuration("create_server", 7*time.Second)
	if errs, _ := s.run(s.wait("ccx63/hel1", createRaw(t, s.client, "large"))); errs[0] != nil {
		t.Fatal(errs[0])
	}
	s.fake.SetActionDuration("create_server", time.Second)
	s.fake.FailAction("create_server", "placement_error", "no room")
	if errs, _ := s.run(s.wait("cx23/fsn1", createRaw(t, s.client, "failed"))); errs[0] == nil {
		t.Fatal("Wait(failing create) = nil; want its error")
	}
	prior := PriorIntervals * DefaultPollInterval
	for _, tt := range []struct {
		command, class string
		want           time.Duration
	}{
		{"create_server", "cx23/fsn1", 3 * time.Second},
		{"create_server", "ccx63/hel1", 7 * time.Second},
		{"create_server", "cx53/fsn1", 3 * time.Second}, // the command's shortest
		{"create_server", "", 3 * time.Second},
		{"delete_server", "", prior},
	} {
		if got := s.w.Expected(tt.command, tt.class); got != tt.want {
			t.Errorf("Expected(%q, %q) = %s; want %s", tt.command, tt.class, got, tt.want)
		}
	}
	if got := testutil.CollectAndCount(m.ActionDuration); got != 1 {
		t.Errorf("duration series = %d; want 1 (create_server)", got)
	}
	if got := testutil.ToFloat64(m.ActionPollRequests); got != float64(s.fake.Count("GET /actions")) {
		t.Errorf("poll requests metric = %v; want %d, the fake's count", got, s.fake.Count("GET /actions"))
	}
	polls, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, mf := range polls {
		if mf.GetName() == "hcloudscale_action_polls" {
			for _, metric := range mf.GetMetric() {
				count += metric.GetHistogram().GetSampleCount()
			}
		}
		if mf.GetName() == "hcloudscale_action_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 10 {
				t.Errorf("durations: %d samples, sum %v; want 2 and 10 (3 s + 7 s)", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	if count != 3 {
		t.Errorf("polls histogram has %d samples; want 3, one per finished action", count)
	}
}

func TestWaiterGap(t *testing.T) {
	const iv = DefaultPollInterval
	w := &Waiter{interval: iv}
	since := epoch
	for _, tt := range []struct {
		name      string
		age       time.Duration
		progress  int
		finishing bool
		want      time.Duration
	}{
		{"others of its command are finishing", 20 * time.Second, 10, true, iv},
		{"no progress: half its age", 3 * time.Second, 0, false, 1500 * time.Millisecond},
		{"no progress, young: one interval", 600 * time.Millisecond, 0, false, iv},
		{"no progress, old: the bound", time.Minute, 0, false, MaxGapIntervals * iv},
		{"progress: what it still needs", 3 * time.Second, 75, false, time.Second},
		{"progress: never less than an interval", 3 * time.Second, 99, false, iv},
		{"progress: never more than the bound", 2 * time.Second, 10, false, MaxGapIntervals * iv},
	} {
		got := w.gapLocked(&tracked{since: since}, &hcloud.Action{Status: hcloud.ActionStatusRunning, Progress: tt.progress}, since.Add(tt.age), tt.finishing)
		if got != tt.want {
			t.Errorf("%s: gap = %s; want %s", tt.name, got, tt.want)
		}
	}
}

// Callers that share actions and give up at random times: every Wait
// returns nil or its context's error, a caller that did not give up gets
// nil (another giving up on a shared action does not affect it), and the
// waiter forgets every action once nobody waits for it.
func TestWaiterSharedActionsAndCancellation(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := newSim(t, nil, nil)
			var actions []*hcloud.Action
			for i := range 12 {
				s.fake.SetActionDuration("create_server", time.Duration(rng.Int64N(int64(4*time.Second))))
				actions = append(actions, createRaw(t, s.client, "s-"+itoa(int64(i))))
			}
			type caller struct {
				actions []*hcloud.Action
				cancel  context.CancelFunc
				done    chan error
			}
			callers := make([]caller, 30)
			for i := range callers {
				var mine []*hcloud.Action
				for range 1 + rng.IntN(4) {
					mine = append(mine, actions[rng.IntN(len(actions))])
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- s.w.Wait(ctx, mine...) }()
				callers[i] = caller{mine, cancel, done}
			}
			results := make([]error, len(callers))
			got := make([]bool, len(callers))
			cancelled := make([]bool, len(callers))
			deadline := time.Now().Add(time.Minute)
			for left := len(callers); left > 0; {
				if time.Now().After(deadline) {
					t.Fatalf("%d callers did not return", left)
				}
				if rng.IntN(8) == 0 {
					i := rng.IntN(len(callers))
					callers[i].cancel()
					cancelled[i] = true
				}
				s.clock.Step(simStep)
				time.Sleep(time.Millisecond)
				for i, c := range callers {
					if got[i] {
						continue
					}
					select {
					case results[i] = <-c.done:
						got[i] = true
						left--
					default:
					}
				}
			}
			for i, err := range results {
				callers[i].cancel()
				switch {
				case err == nil:
				case !cancelled[i]:
					t.Errorf("caller %d, never cancelled: %v; want nil", i, err)
				case !errors.Is(err, context.Canceled):
					t.Errorf("caller %d: %v; want nil or context.Canceled", i, err)
				}
			}
			// Every action finished; the waiter holds nothing.
			eventually(t, "the waiter to forget every action", func() bool {
				s.w.mu.Lock()
				defer s.w.mu.Unlock()
				return len(s.w.byID) == 0
			})
			checkGaps(t, s.pollStarts(), DefaultPollInterval)
		})
	}
}

// TestAfterIntervals: AfterIntervals(n) fires once n poll intervals have
// passed on the waiter's clock, also when the clock moves in one step.
func TestAfterIntervals(t *testing.T) {
	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	clock := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := New(&fake.Client().Action, WithClock(clock))
	t.Cleanup(w.Close)
	for _, n := range []int{0, 1, 3, MaxGapIntervals} {
		intervals := max(n, 1)
		ch := w.AfterIntervals(n)
		clock.Step(time.Duration(intervals)*DefaultPollInterval - time.Millisecond)
		select {
		case <-ch:
			t.Fatalf("AfterIntervals(%d) fired before %d intervals", n, intervals)
		default:
		}
		clock.Step(time.Millisecond)
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatalf("AfterIntervals(%d) did not fire after %d intervals", n, intervals)
		}
	}
}
