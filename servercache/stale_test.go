package servercache

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestTypeCatalogServesStaleThroughAnOutage takes the API down when the
// catalogue expires: lookups keep answering from the catalogue in memory,
// retries come every 10 s, the first one after the API
// recovers replaces the catalogue, and StaleSince tells when staleness
// began.
func TestTypeCatalogServesStaleThroughAnOutage(t *testing.T) {
	fake, client, clock := newFake(t)
	c := NewTypeCatalog(&client.ServerType, WithClock(clock), WithRand(seqRand(0.5)))
	defer c.Close()

	if st, err := c.Lookup(t.Context(), "cpx21"); err != nil || st == nil {
		t.Fatalf("Lookup(cpx21) = %v, %v; want the type", st, err)
	}
	if got := c.StaleSince(); !got.IsZero() {
		t.Errorf("StaleSince() of a fresh catalogue = %v; want zero", got)
	}

	fake.SetOutage(hcloudtest.RequestFault{Code: "server_error"}, hcloudtest.RequestFault{Code: "timeout"})
	clock.Step(DefaultTypeTTL)
	outageStart := clock.Now()
	const step = 10 * time.Second
	for clock.Now().Sub(outageStart) < 11*time.Minute {
		st, err := c.Lookup(t.Context(), "cpx21")
		if err != nil || st == nil || st.Name != "cpx21" {
			t.Fatalf("Lookup(cpx21) %v into the outage = %v, %v; want the stale type", clock.Now().Sub(outageStart), st, err)
		}
		all, err := c.All(t.Context())
		if err != nil || len(all) == 0 {
			t.Fatalf("All() %v into the outage = %d types, %v; want the stale catalogue", clock.Now().Sub(outageStart), len(all), err)
		}
		if got := c.StaleSince(); !got.Equal(outageStart) {
			t.Fatalf("StaleSince() during the outage = %v; want %v, the first failed fetch", got, outageStart)
		}
		clock.Step(step)
	}
	// 11 minutes of backoff, 5 s then capped at 10 s, with a reader
	// every 10 s: a fetch at about every read, at least 60 attempts.
	if got := fake.Count(listServerTypes); got < 1+60 {
		t.Errorf("%d %s requests in all during 11 minutes of outage; want at least 61 (a retry every 10 s)", got, listServerTypes)
	}

	fake.SetOutage()
	recovered := clock.Now()
	before := fake.Count(listServerTypes)
	for c.StaleSince() != (time.Time{}) {
		if clock.Now().Sub(recovered) > maxFailureBackoff {
			t.Fatalf("catalogue still stale %v after the API recovered; want a fetch within %v", clock.Now().Sub(recovered), maxFailureBackoff)
		}
		if _, err := c.Lookup(t.Context(), "cpx21"); err != nil {
			t.Fatalf("Lookup() after recovery error: %v", err)
		}
		clock.Step(step)
	}
	if got := fake.Count(listServerTypes) - before; got != 1 {
		t.Errorf("recovery took %d fetches; want 1", got)
	}
	if !c.refresh.expiry().After(clock.Now()) {
		t.Error("catalogue not fresh after recovery")
	}
}

// TestTypeCatalogStalenessIsBounded checks that a catalogue older than
// WithMaxStale is not served: lookups fail with the fetch's error.
func TestTypeCatalogStalenessIsBounded(t *testing.T) {
	fake, client, clock := newFake(t)
	const maxStale = 2 * time.Hour
	c := NewTypeCatalog(&client.ServerType, WithClock(clock), WithRand(seqRand(0.5)), WithMaxStale(maxStale))
	defer c.Close()
	if _, err := c.Lookup(t.Context(), "cpx21"); err != nil {
		t.Fatal(err)
	}
	fake.SetOutage(hcloudtest.RequestFault{Code: "server_error"})

	clock.Step(maxStale)
	if st, err := c.Lookup(t.Context(), "cpx21"); err != nil || st == nil {
		t.Errorf("Lookup() of a catalogue %v old = %v, %v; want the stale type", maxStale, st, err)
	}
	clock.Step(maxFailureBackoff + time.Second)
	st, err := c.Lookup(t.Context(), "cpx21")
	if !hcloud.IsError(err, hcloud.ErrorCodeServerError) || st != nil {
		t.Errorf("Lookup() of a catalogue older than %v = %v, %v; want the fetch's server_error", maxStale, st, err)
	}
}

// TestTypeCatalogFirstFetchFailure checks that with nothing in memory
// there is nothing stale to serve: the error goes back.
func TestTypeCatalogFirstFetchFailure(t *testing.T) {
	fake, client, clock := newFake(t)
	c := NewTypeCatalog(&client.ServerType, WithClock(clock))
	defer c.Close()
	fake.SetOutage(hcloudtest.RequestFault{Code: "server_error"})
	if st, err := c.Lookup(t.Context(), "cpx21"); !hcloud.IsError(err, hcloud.ErrorCodeServerError) {
		t.Errorf("Lookup() with no catalogue and the API down = %v, %v; want server_error", st, err)
	}
	if got := c.StaleSince(); !got.IsZero() {
		t.Errorf("StaleSince() with nothing fetched = %v; want zero", got)
	}
}

// TestBackoffIsCappedAtOneLoop checks that a fetch that keeps failing is
// retried every 10 s, one autoscaler loop, however long the TTL.
func TestBackoffIsCappedAtOneLoop(t *testing.T) {
	r := &refresher{ttl: time.Hour}
	var got []time.Duration
	for r.failures = 1; r.failures <= 5; r.failures++ {
		got = append(got, r.backoffLocked())
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff with a one-hour TTL mismatch (-want +got):\n%s", diff)
	}
}
