package pool

import (
	"errors"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
)

// offeringFamily builds the node groups of pool workers (max maxSize) on
// cx23 in fsn1, then cx33 in nbg1, sharing one family and one registry of
// unavailable offerings; drift lists the pool's drift reasons.
func (e *env) offeringFamily(maxSize int, drift ...string) (first, second *Pool, reg *Offerings) {
	e.t.Helper()
	cfg := poolConfig("workers", 0, maxSize)
	cfg.Offerings = []config.Offering{{ServerType: "cx23", Location: "fsn1"}, {ServerType: "cx33", Location: "nbg1"}}
	cfg.Replace = &config.Replace{Drift: drift, MaxSurge: 1, MaxInFlight: 1, JoinTimeout: config.DefaultReplaceJoinTimeout,
		DrainTimeout: config.DefaultReplaceDrainTimeout, RetryAfter: config.DefaultReplaceRetryAfter}
	f := NewFamily("workers")
	reg, err := NewOfferings(e.clock, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	groups := cfg.OfferingGroups()
	first = e.newPool(groups[0], WithFamily(f), WithOfferings(reg))
	second = e.newPool(groups[1], WithFamily(f), WithOfferings(reg))
	return first, second, reg
}

func soldOut(serverType, location string) UnavailableError {
	return UnavailableError{ServerType: serverType, Location: location, Code: "resource_unavailable", Message: "sold out"}
}

// driftReasons returns the reasons Drift reports per server name, and
// their details.
func driftReasons(t *testing.T, p *Pool) (map[string][]DriftReason, []string) {
	t.Helper()
	drift, err := p.Drift(t.Context())
	if err != nil {
		t.Fatalf("Drift(%s): %v", p.Name(), err)
	}
	out := map[string][]DriftReason{}
	var details []string
	for _, d := range drift {
		out[d.Name] = d.Reasons
		details = append(details, d.Details...)
	}
	return out, details
}

// TestDriftOffering checks the drift reason offering: a server on the
// second offering drifts exactly while the first is available (no
// capacity error remembered), only in a pool whose drift lists the
// reason, and never on the first offering.
func TestDriftOffering(t *testing.T) {
	for _, tt := range []struct {
		name  string
		drift []string
		want  bool // drift reported while the first offering is available
	}{
		{"listed", []string{"offering"}, true},
		{"not listed: not drift by default", []string{"image", "user_data"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			first, second, reg := e.offeringFamily(4, tt.drift...)
			ctx := t.Context()
			for _, p := range []*Pool{first, second} {
				if err := p.IncreaseSize(ctx, 1); err != nil {
					t.Fatal(err)
				}
				e.settle(p)
			}
			check := func(when string, want bool) {
				t.Helper()
				got, details := driftReasons(t, second)
				on := len(got) == 1 && len(got[second.Servers()[0].Name]) == 1 && got[second.Servers()[0].Name][0] == DriftOffering
				if on != want || (!want && len(got) > 0) {
					t.Errorf("%s: second offering's drift %v; want offering: %t", when, got, want)
				}
				if want && (len(details) != 1 || !strings.Contains(details[0], "offering cx33 in nbg1; the earlier offering cx23 in fsn1 (node group workers) is available")) {
					t.Errorf("%s: details %q; want them to name both offerings and the group", when, details)
				}
				if firstDrift, _ := driftReasons(t, first); len(firstDrift) > 0 {
					t.Errorf("%s: first offering's drift %v; want none", when, firstDrift)
				}
			}
			check("first available", tt.want)
			if got := second.EarlierAvailable(); got != first {
				t.Errorf("EarlierAvailable() = %v; want the first offering", got)
			}
			if got := first.EarlierAvailable(); got != nil {
				t.Errorf("first.EarlierAvailable() = %s; want nil", got.Name())
			}
			reg.MarkUnavailable(soldOut("cx23", "fsn1"), DefaultUnavailableTTL)
			check("first sold out", false)
			if got := second.EarlierAvailable(); got != nil {
				t.Errorf("EarlierAvailable() with the first sold out = %s; want nil", got.Name())
			}
			e.clock.Step(DefaultUnavailableTTL)
			check("first back in stock", tt.want)
		})
	}
}

// TestSurgeIntoEarlierOffering surges the replacement of a server of the
// second offering in the first offering's group: the bound is the pool's
// max + maxSurge across both groups, and a repeated Surge, in either
// group, finds the replacement.
func TestSurgeIntoEarlierOffering(t *testing.T) {
	e := newEnv(t, envOptions{})
	first, second, _ := e.offeringFamily(2, "offering")
	ctx := t.Context()
	if err := second.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	e.settle(second)
	olds := second.Servers()
	name, err := first.Surge(ctx, olds[0].ID, 1)
	if err != nil {
		t.Fatalf("Surge in the first offering = %v; want a claim (2 + 1 <= max 2 + surge 1)", err)
	}
	for _, p := range []*Pool{first, second} {
		again, err := p.Surge(ctx, olds[0].ID, 1)
		if err != nil || again != name {
			t.Errorf("%s: Surge again = %q, %v; want the replacement %q", p.Name(), again, err, name)
		}
	}
	if _, err := first.Surge(ctx, olds[1].ID, 1); !errors.Is(err, ErrAboveMax) {
		t.Errorf("second Surge across the offerings = %v; want ErrAboveMax (3 + 1 > 2 + 1)", err)
	}
	if _, err := second.Surge(ctx, olds[1].ID, 1); !errors.Is(err, ErrAboveMax) {
		t.Errorf("second Surge in the old offering = %v; want ErrAboveMax", err)
	}
	e.settle(first)
	news := first.Servers()
	if len(news) != 1 || news[0].Name != name || news[0].ServerType != "cx23" || replacesOf(news[0].Labels) != olds[0].ID {
		t.Fatalf("first offering's servers %+v; want the replacement %s on cx23 labelled to replace %d", news, name, olds[0].ID)
	}
	if got := len(second.Servers()); got != 2 {
		t.Errorf("second offering has %d servers; want the 2 old ones (the old server stays in its group)", got)
	}
	if err := second.DeleteInstances(ctx, []string{olds[0].ProviderID()}); err != nil {
		t.Fatalf("deleting the replaced server: %v", err)
	}
	e.settle(second)
	if got := len(second.Servers()) + len(first.Servers()); got != 2 {
		t.Errorf("%d servers after the old one's delete; want 2 (max)", got)
	}
}
