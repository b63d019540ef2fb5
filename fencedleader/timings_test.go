package fencedleader

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestValidateRefusesTimingsWithoutMargin(t *testing.T) {
	ok := testConfig("a")
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string // "" for valid
	}{
		{"the tests' timings", func(*Config) {}, ""},
		{"the defaults", func(c *Config) { *c = DefaultConfig("ns", "lease", "a") }, ""},
		{"1.9s is stored as 1s", func(c *Config) { c.LeaseDuration = 1900 * time.Millisecond },
			"LeaseDuration 1.9s: must be 2s or more"},
		{"900ms is stored as 0s", func(c *Config) { c.LeaseDuration = 900 * time.Millisecond },
			"LeaseDuration 900ms: must be 2s or more"},
		{"fractional seconds", func(c *Config) { c.LeaseDuration = 4500 * time.Millisecond },
			"LeaseDuration 4.5s: must be whole seconds: the Lease stores 4s"},
		{"no room after the renew deadline", func(c *Config) { c.RenewDeadline, c.RetryPeriod = 3*time.Second, 500*time.Millisecond },
			"RenewDeadline 3s: with RetryPeriod 500ms must fit in the write window 2.6s"},
		{"retry period eats the margin", func(c *Config) { c.RenewDeadline, c.RetryPeriod = 2*time.Second, 700*time.Millisecond },
			"RenewDeadline 2s: with RetryPeriod 700ms must fit in the write window 2.6s"},
		{"write grace off", func(c *Config) { c.WriteGrace = 0 }, "WriteGrace 0s: must be positive"},
		{"no identity", func(c *Config) { c.Identity = "" }, "Identity: must not be empty"},
	} {
		cfg := ok
		c.change(&cfg)
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v; want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Validate() = %v; want %q", c.name, err, c.want)
		}
	}
	// Renamed for flags, the reason's references too.
	cfg := ok
	cfg.RenewDeadline, cfg.RetryPeriod = 3*time.Second, 500*time.Millisecond
	errs := Rename(cfg.Validate(), func(s string) string {
		return map[string]string{"RenewDeadline": "--renew", "RetryPeriod": "--retry"}[s]
	})
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "--renew 3s: with --retry 500ms must fit") {
		t.Errorf("Rename = %v; want the flags named", errs)
	}
}

// TestStandbyCannotTakeOverWithinAPermit: a standby compares the Lease's
// records as client-go marshals them, with the renew time in whole
// seconds, so renewals within one second look alike and its timer starts
// at the first of them. The leader renews every 100ms; it is cut off from
// the API server right after a renewal late in a second. Its last permit
// must end before the standby holds the Lease. With the permit running to
// the lease duration less a tenth (3.6s) the standby held the Lease about
// 3.2-3.5s after that renewal.
func TestStandbyCannotTakeOverWithinAPermit(t *testing.T) {
	api := released()
	clientA, linkA := api.client(1)
	clientB, _ := api.client(2)
	var armed atomic.Bool
	linkA.cutAfter = func(l *coordinationv1.Lease) bool {
		if l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "a" {
			return false
		}
		frac := l.Spec.RenewTime.Nanosecond()
		if frac < 300e6 {
			armed.Store(true) // a renewal early in a second: the standby has seen this second
		}
		return armed.Load() && frac > 800e6
	}
	a := startLeader(t, testConfig("a"), clientA, Hooks{})
	if !waitFor(5*time.Second, a.Leading) {
		t.Fatal("a does not lead")
	}
	b := startLeader(t, testConfig("b"), clientB, Hooks{})
	if !waitFor(10*time.Second, linkA.cut.Load) {
		t.Fatal("no renewal of a late in a second")
	}
	deadline, took := lastPermitAndTakeOver(t, api, a, b)
	a.mu.Lock()
	last := a.renewedWall
	a.mu.Unlock()
	t.Logf("a's last renewal taken at .%03d of its second; its permit ran to +%s; b took over at +%s",
		last.Nanosecond()/1e6, deadline.Sub(last).Round(time.Millisecond), took.Sub(last).Round(time.Millisecond))
}

// lastPermitAndTakeOver asks a, just cut off from the API server, for a
// permit, waits until b holds the Lease and checks that the permit ended
// before. It returns the permit's deadline and when b took the Lease.
func lastPermitAndTakeOver(t *testing.T, api *leaseAPI, a, b *Leader) (deadline, took time.Time) {
	t.Helper()
	cut := time.Now()
	permit, err := a.AllowWrite()
	if err != nil {
		t.Fatalf("a right after its last renewal: %v", err)
	}
	permit.Done(true)
	if !waitFor(10*time.Second, b.Leading) {
		t.Fatal("b does not take the Lease over")
	}
	took = api.acquired("b", cut)
	if !permit.Deadline.Before(took) {
		t.Errorf("a's permit ends %s after b took the Lease over", permit.Deadline.Sub(took).Round(time.Millisecond))
	}
	return permit.Deadline, took
}

// TestPermitEndsByTheRenewTime: client-go takes a renewal's renew time
// before it sends it, and when the fast path fails it reads the Lease
// first. A standby that saw an earlier renewal of the same second takes
// the later one for no change (the renew time marshals to whole seconds)
// and times the Lease from the earlier one. Here a renewal early in a
// second fails at once, its retry reads the Lease for 2s and then sends
// the renew time taken before, and the leader is cut off after it. Its
// last permit must end before the standby holds the Lease; measured from
// when that renewal was sent, it ran past.
func TestPermitEndsByTheRenewTime(t *testing.T) {
	api := released()
	clientA, linkA := api.client(1)
	clientB, _ := api.client(2)
	var (
		armed atomic.Bool
		mu    sync.Mutex
		stage int   // 1: a renewal failed; 2: the read after it was slow; 3: cut
		okSec int64 // the second of the renew time a's last renewal wrote
	)
	linkA.before = func(act k8stesting.Action) error {
		mu.Lock()
		defer mu.Unlock()
		switch u, _ := act.(k8stesting.UpdateAction); {
		case stage == 0 && u != nil && armed.Load():
			spec := u.GetObject().(*coordinationv1.Lease).Spec
			if ptr.Deref(spec.HolderIdentity, "") == "a" && spec.RenewTime.Unix() == okSec && spec.RenewTime.Nanosecond() < 300e6 {
				stage = 1
				return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
			}
		case stage == 1 && act.GetVerb() == "get":
			stage = 2
			mu.Unlock()
			time.Sleep(2 * time.Second)
			mu.Lock()
		}
		return nil
	}
	linkA.cutAfter = func(l *coordinationv1.Lease) bool {
		mu.Lock()
		defer mu.Unlock()
		if stage == 2 {
			stage = 3
			return true
		}
		okSec = l.Spec.RenewTime.Unix()
		return false
	}
	cfg := testConfig("a")
	cfg.RenewDeadline = 2500 * time.Millisecond
	a := startLeader(t, cfg, clientA, Hooks{})
	if !waitFor(5*time.Second, a.Leading) {
		t.Fatal("a does not lead")
	}
	cfg.Identity = "b"
	b := startLeader(t, cfg, clientB, Hooks{})
	if !waitFor(5*time.Second, func() bool { return b.Holder() == "a" }) {
		t.Fatal("b does not see a lead")
	}
	armed.Store(true)
	if !waitFor(10*time.Second, linkA.cut.Load) {
		t.Fatal("no slow renewal of a")
	}
	lastPermitAndTakeOver(t, api, a, b)
}
