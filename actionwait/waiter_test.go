package actionwait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// waiterEnv is a fake with a fake clock and a waiter polling every
// millisecond of wall time.
func waiterEnv(t *testing.T, opts ...hcloudtest.Option) (*hcloudtest.Server, *hcloud.Client, *testingclock.FakeClock, *Waiter) {
	t.Helper()
	clock := testingclock.NewFakeClock(epoch)
	fake := hcloudtest.NewServer(append([]hcloudtest.Option{hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0)}, opts...)...)
	t.Cleanup(fake.Close)
	client := fake.Client()
	w := New(&client.Action, WithPollInterval(time.Millisecond))
	t.Cleanup(w.Close)
	return fake, client, clock, w
}

// createRaw creates a server directly and returns its create action.
func createRaw(t *testing.T, client *hcloud.Client, name string) *hcloud.Action {
	t.Helper()
	start := false
	res, _, err := client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
		Name: name, ServerType: &hcloud.ServerType{Name: "cx23"}, Image: &hcloud.Image{Name: "ubuntu-24.04"},
		Location: &hcloud.Location{Name: "fsn1"}, StartAfterCreate: &start,
	})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return res.Action
}

// waitAsync runs Wait in a goroutine.
func waitAsync(ctx context.Context, w *Waiter, actions ...*hcloud.Action) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Wait(ctx, actions...) }()
	return ch
}

func receive(t *testing.T, ch <-chan error, clock *testingclock.FakeClock) error {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-ch:
			return err
		case <-deadline:
			t.Fatal("Wait did not return")
			return nil
		case <-time.After(time.Millisecond):
			if clock != nil {
				clock.Step(100 * time.Millisecond)
			}
		}
	}
}

// waitRegistered waits until n calls wait for the action with the given
// ID, so that what a test does next happens to a waiting call rather than
// racing its start.
func waitRegistered(t *testing.T, w *Waiter, id int64, n int) {
	t.Helper()
	eventually(t, "the callers to register", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		t := w.byID[id]
		return t != nil && len(t.calls) == n
	})
}

func TestWaiterReportsSuccessAndFailure(t *testing.T) {
	fake, client, clock, w := waiterEnv(t)
	ok := createRaw(t, client, "ok")
	fake.FailAction("create_server", "placement_error", "no room")
	bad := createRaw(t, client, "bad")

	if err := receive(t, waitAsync(t.Context(), w, ok), clock); err != nil {
		t.Errorf("Wait(successful action) = %v; want nil", err)
	}
	err := receive(t, waitAsync(t.Context(), w, ok, bad, nil), clock)
	var ae hcloud.ActionError
	if !errors.As(err, &ae) || ae.Code != "placement_error" || ae.Message != "no room" {
		t.Errorf("Wait(ok, bad, nil) = %v; want an ActionError placement_error", err)
	}
}

func TestWaiterFinishedActionsNeedNoPoll(t *testing.T) {
	fake, _, _, w := waiterEnv(t)
	done := &hcloud.Action{ID: 1, Status: hcloud.ActionStatusSuccess}
	failed := &hcloud.Action{ID: 2, Status: hcloud.ActionStatusError, ErrorCode: "x", ErrorMessage: "y"}
	if err := w.Wait(t.Context(), done); err != nil {
		t.Errorf("Wait(finished) = %v; want nil", err)
	}
	if err := w.Wait(t.Context(), failed); err == nil {
		t.Error("Wait(failed) = nil; want its error")
	}
	if err := w.Wait(t.Context()); err != nil {
		t.Errorf("Wait() = %v; want nil", err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := fake.Count("GET /actions"); got != 0 {
		t.Errorf("GET /actions = %d; want 0: nothing was running, the waiter must stay idle", got)
	}
}

func TestWaiterCallerCancellation(t *testing.T) {
	_, client, clock, w := waiterEnv(t)
	a := createRaw(t, client, "a")
	ctx, cancel := context.WithCancel(t.Context())
	first := waitAsync(ctx, w, a)
	second := waitAsync(t.Context(), w, a)
	waitRegistered(t, w, a.ID, 2)
	cancel()
	err := receive(t, first, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), itoa(a.ID)) {
		t.Errorf("Wait after cancel = %v; want context.Canceled naming action %d", err, a.ID)
	}
	// The other caller of the same action keeps waiting and gets it.
	if err := receive(t, second, clock); err != nil {
		t.Errorf("second caller = %v; want nil", err)
	}
}

func TestWaiterActionNotFound(t *testing.T) {
	_, _, _, w := waiterEnv(t)
	err := w.Wait(t.Context(), &hcloud.Action{ID: 987654, Status: hcloud.ActionStatusRunning})
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.ID != 987654 {
		t.Errorf("Wait(unknown action) = %v; want NotFoundError{987654}", err)
	}
}

func TestWaiterKeepsWaitingThroughPollErrors(t *testing.T) {
	fake, client, clock, w := waiterEnv(t)
	a := createRaw(t, client, "a")
	for range 3 {
		fake.FailRequest("GET /actions", 1, hcloudtest.RequestFault{Code: "service_error"})
	}
	if err := receive(t, waitAsync(t.Context(), w, a), clock); err != nil {
		t.Errorf("Wait through failing polls = %v; want nil", err)
	}
	if got := fake.Count("GET /actions"); got < 4 {
		t.Errorf("GET /actions = %d; want at least 4 (3 failed polls, then one that worked)", got)
	}
}

func TestWaiterClose(t *testing.T) {
	_, client, _, w := waiterEnv(t)
	a := createRaw(t, client, "a")
	ch := waitAsync(t.Context(), w, a)
	waitRegistered(t, w, a.ID, 1)
	w.Close()
	if err := receive(t, ch, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait during Close = %v; want ErrClosed", err)
	}
	if err := w.Wait(t.Context(), a); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v; want ErrClosed", err)
	}
	w.Close() // idempotent
}
