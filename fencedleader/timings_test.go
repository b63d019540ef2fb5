package fencedleader

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
	cut := time.Now()
	permit, err := a.AllowWrite()
	if err != nil {
		t.Fatalf("a right after its last renewal: %v", err)
	}
	permit.Done(true)
	if !waitFor(10*time.Second, b.Leading) {
		t.Fatal("b does not take the Lease over")
	}
	took := api.acquired("b", cut)
	a.mu.Lock()
	last := a.renewedWall
	a.mu.Unlock()
	t.Logf("a's last renewal sent at .%03d of its second; its permit ran to +%s; b took over at +%s",
		last.Nanosecond()/1e6, permit.Deadline.Sub(last).Round(time.Millisecond), took.Sub(last).Round(time.Millisecond))
	if !permit.Deadline.Before(took) {
		t.Errorf("a's permit ends %s after b took the Lease over", permit.Deadline.Sub(took).Round(time.Millisecond))
	}
}
