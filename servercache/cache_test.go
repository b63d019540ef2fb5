package servercache

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestGetCoalescesConcurrentCallersAfterExpiry(t *testing.T) {
	fake, client, clock := newFake(t)
	want := addServers(t, fake, "workers", 120, poolLabels("workers", "")) // 3 pages
	c := New(&client.Server, WithClock(clock))
	defer c.Close()

	if _, err := c.Get(t.Context()); err != nil {
		t.Fatalf("first Get() error: %v", err)
	}
	clock.Step(DefaultTTL * 2) // expired whatever the jitter
	fake.ResetCounts()
	// Slow pages keep the listing in flight while all callers arrive.
	fake.SetLatency(20 * time.Millisecond)

	const callers = 100
	var wg sync.WaitGroup
	snaps := make([]*Snapshot, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			snaps[i], errs[i] = c.Get(t.Context())
		})
	}
	close(start)
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Fatalf("Get() of caller %d error: %v", i, err)
		}
		if snaps[i] != snaps[0] {
			t.Fatalf("caller %d got another snapshot than caller 0; want one shared listing", i)
		}
	}
	if diff := cmp.Diff(want, serverIDs(snaps[0])); diff != "" {
		t.Errorf("listed server IDs mismatch (-want +got):\n%s", diff)
	}
	// One listing of 120 servers is 3 pages of 50.
	if got := fake.Count(listServers); got != 3 {
		t.Errorf("%d concurrent Get() after expiry made %d %s requests; want 3 (one listing of 3 pages)", callers, got, listServers)
	}
}

func TestGetReturnsOnlyTheClustersPoolServers(t *testing.T) {
	fake, client, clock := newFake(t)
	prod := addServers(t, fake, "prod-workers", 3, poolLabels("workers", "prod"))
	prodGPU := addServers(t, fake, "prod-gpu", 1, poolLabels("gpu", "prod"))
	staging := addServers(t, fake, "staging-workers", 2, poolLabels("workers", "staging"))
	noCluster := addServers(t, fake, "legacy", 1, poolLabels("workers", ""))
	addServers(t, fake, "bastion", 1, map[string]string{"role": "bastion"})
	addServers(t, fake, "unlabelled", 1, nil)
	addServers(t, fake, "cluster-only", 1, map[string]string{"hcloudscale/cluster": "prod"})
	// The selector matches the key with an empty value; the cache must
	// still drop the server, since it belongs to no pool.
	addServers(t, fake, "empty-pool", 1, poolLabels("", "prod"))

	tests := []struct {
		name         string
		cluster      string
		wantSelector string
		wantIDs      []int64
		wantPools    map[string][]int64
	}{
		{
			name:         "scoped to a cluster",
			cluster:      "prod",
			wantSelector: "hcloud/node-group,hcloudscale/cluster=prod",
			wantIDs:      slices.Concat(prod, prodGPU),
			wantPools:    map[string][]int64{"workers": prod, "gpu": prodGPU},
		},
		{
			name:         "the other cluster",
			cluster:      "staging",
			wantSelector: "hcloud/node-group,hcloudscale/cluster=staging",
			wantIDs:      staging,
			wantPools:    map[string][]int64{"workers": staging, "gpu": nil},
		},
		{
			// Servers labelled for a named cluster are not an unnamed
			// cluster's, whatever their pool label.
			name:         "no cluster name: pool servers without a cluster label",
			cluster:      "",
			wantSelector: "hcloud/node-group,!hcloudscale/cluster",
			wantIDs:      noCluster,
			wantPools:    map[string][]int64{"workers": noCluster, "gpu": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.ResetCounts()
			c := New(&client.Server, WithClusterName(tt.cluster), WithClock(clock))
			defer c.Close()
			if got := c.Selector(); got != tt.wantSelector {
				t.Errorf("Selector() = %q; want %q", got, tt.wantSelector)
			}
			snap, err := c.Get(t.Context())
			if err != nil {
				t.Fatalf("Get() error: %v", err)
			}
			if diff := cmp.Diff(tt.wantIDs, serverIDs(snap)); diff != "" {
				t.Errorf("server IDs mismatch (-want +got):\n%s", diff)
			}
			for pool, want := range tt.wantPools {
				if diff := cmp.Diff(want, ids(snap.Pool(pool)), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Pool(%q) IDs mismatch (-want +got):\n%s", pool, diff)
				}
			}
			reqs := fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("made %d requests; want 1 listing page", len(reqs))
			}
			wantQuery := url.Values{"label_selector": {tt.wantSelector}, "page": {"1"}, "per_page": {"50"}, "sort": {"id:asc"}}
			if diff := cmp.Diff(wantQuery, reqs[0].Query); diff != "" {
				t.Errorf("listing query mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestByNodeAgainstTheAPI(t *testing.T) {
	fake, client, clock := newFake(t)
	worker := addServers(t, fake, "workers", 1, poolLabels("workers", ""))[0]
	// A server named after another server's ID, and one named after an ID
	// that no server has.
	namedLikeWorker, err := fake.AddServer(hcloudtest.ServerInfo{Name: strconv.FormatInt(worker, 10), Labels: poolLabels("workers", "")})
	if err != nil {
		t.Fatal(err)
	}
	const unusedID = 999999
	namedLikeNothing, err := fake.AddServer(hcloudtest.ServerInfo{Name: strconv.Itoa(unusedID), Labels: poolLabels("workers", "")})
	if err != nil {
		t.Fatal(err)
	}
	c := New(&client.Server, WithClock(clock))
	defer c.Close()
	snap, err := c.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() error: %v", err)
	}

	tests := []struct {
		name       string
		providerID string
		nodeName   string
		wantID     int64 // 0: none
	}{
		{"cloud provider ID", "hcloud://" + strconv.FormatInt(worker, 10), "", worker},
		{"provider ID of the server named like it", "hcloud://" + strconv.FormatInt(namedLikeWorker, 10), "", namedLikeWorker},
		{"numeric provider ID never matches a server name", "hcloud://" + strconv.Itoa(unusedID), "", 0},
		{"node name without provider ID", "", "workers-0", worker},
		{"numeric node name is a name", "", strconv.Itoa(unusedID), namedLikeNothing},
		{"robot provider ID", "hrobot://" + strconv.FormatInt(worker, 10), "workers-0", 0},
		{"legacy robot provider ID", "hcloud://bm-" + strconv.FormatInt(worker, 10), "workers-0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotID int64
			if s := snap.ByNode(tt.providerID, tt.nodeName); s != nil {
				gotID = s.ID
			}
			if gotID != tt.wantID {
				t.Errorf("ByNode(%q, %q) = server %d; want %d (0: none)", tt.providerID, tt.nodeName, gotID, tt.wantID)
			}
		})
	}
}

func TestSnapshotRecordsTheAPIServers(t *testing.T) {
	fake, client, clock := newFake(t)
	created := epoch.Add(-time.Hour)
	id, err := fake.AddServer(hcloudtest.ServerInfo{
		Name: "gpu-1", Status: hcloud.ServerStatusOff, ServerType: "cax21", Location: "hel1",
		Labels: poolLabels("gpu", "prod"), Created: created,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := New(&client.Server, WithClock(clock), WithClusterName("prod"))
	defer c.Close()
	snap, err := c.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() error: %v", err)
	}
	info, ok := fake.ServerByID(id)
	if !ok || info.ImageID == 0 {
		t.Fatalf("fake server %d: %+v, %v; want one with an image", id, info, ok)
	}
	want := []Server{{ID: id, Name: "gpu-1", Pool: "gpu", Status: hcloud.ServerStatusOff, ServerType: "cax21", Location: "hel1", Created: created,
		ImageID: info.ImageID, Labels: poolLabels("gpu", "prod")}}
	if diff := cmp.Diff(want, deref(snap.All())); diff != "" {
		t.Errorf("snapshot mismatch (-want +got):\n%s", diff)
	}
	if got := snap.FetchedAt(); !got.Equal(epoch) {
		t.Errorf("FetchedAt() = %v; want the clock's %v", got, epoch)
	}
}

func TestExpiryJitterAndBudget(t *testing.T) {
	tests := []struct {
		name    string
		servers int
		opts    []Option
		rand    float64
		want    time.Duration // from the listing to the expiry
	}{
		{"low end of the default jitter", 1, nil, 0, 54 * time.Second},
		{"middle", 1, nil, 0.5, 60 * time.Second},
		{"upper quarter", 1, nil, 0.75, 63 * time.Second},
		{"no jitter", 1, []Option{WithJitter(0)}, 0.9, 60 * time.Second},
		{"jitter clamped to MaxJitter", 1, []Option{WithJitter(3)}, 0, 30 * time.Second},
		{"own TTL", 1, []Option{WithTTL(10 * time.Minute), WithJitter(0.2)}, 0.25, 9 * time.Minute},
		// 3 pages at 10 requests an hour may cost a listing every 18
		// minutes: the low end of the jitter lands exactly there.
		{"budget floor, low end of the jitter", 120, []Option{WithListingBudget(10)}, 0, 18 * time.Minute},
		{"budget floor, middle of the jitter", 120, []Option{WithListingBudget(10)}, 0.5, 20 * time.Minute},
		{"budget floor below the TTL", 120, []Option{WithListingBudget(3600)}, 0.5, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, client, clock := newFake(t)
			addServers(t, fake, "w", tt.servers, poolLabels("w", ""))
			opts := append([]Option{WithClock(clock), WithRand(seqRand(tt.rand))}, tt.opts...)
			c := New(&client.Server, opts...)
			defer c.Close()
			if _, err := c.Get(t.Context()); err != nil {
				t.Fatalf("Get() error: %v", err)
			}
			if got := c.ExpiresAt().Sub(epoch); got != tt.want {
				t.Fatalf("ExpiresAt() = listing + %v; want + %v", got, tt.want)
			}
			pages := fake.Count(listServers)

			clock.Step(tt.want - time.Nanosecond)
			if _, err := c.Get(t.Context()); err != nil {
				t.Fatalf("Get() just before expiry error: %v", err)
			}
			if got := fake.Count(listServers); got != pages {
				t.Errorf("Get() just before expiry made %d listing requests; want none", got-pages)
			}
			clock.Step(time.Nanosecond)
			if _, err := c.Get(t.Context()); err != nil {
				t.Fatalf("Get() at expiry error: %v", err)
			}
			if got := fake.Count(listServers); got != 2*pages {
				t.Errorf("Get() at expiry made %d listing requests; want %d (one listing)", got-pages, pages)
			}
		})
	}
}

func TestJitterSpreadsExpiries(t *testing.T) {
	_, client, clock := newFake(t)
	c := New(&client.Server, WithClock(clock), WithRand(seqRand(0, 0.2, 0.4, 0.6, 0.8, 0.999)))
	defer c.Close()
	var got []time.Duration
	for range 6 {
		if _, err := c.Refresh(t.Context()); err != nil {
			t.Fatalf("Refresh() error: %v", err)
		}
		got = append(got, c.ExpiresAt().Sub(clock.Now()))
	}
	// TTL 60 s, jitter 10%: 54 s up to just under 66 s.
	want := []time.Duration{54 * time.Second, 56400 * time.Millisecond, 58800 * time.Millisecond,
		61200 * time.Millisecond, 63600 * time.Millisecond, 65988 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expiries after successive listings mismatch (-want +got):\n%s", diff)
	}
}

func TestCancelledCallerReturnsPromptly(t *testing.T) {
	fake, client, clock := newFake(t)
	want := addServers(t, fake, "w", 3, poolLabels("w", ""))
	const latency = 500 * time.Millisecond
	fake.SetLatency(latency)
	c := New(&client.Server, WithClock(clock))
	defer c.Close()

	ctx, cancel := context.WithCancel(t.Context())
	cancelledDone := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx)
		cancelledDone <- err
	}()
	patient := make(chan *Snapshot, 1)
	go func() {
		snap, err := c.Get(t.Context())
		if err != nil {
			t.Errorf("patient Get() error: %v", err)
		}
		patient <- snap
	}()

	time.Sleep(50 * time.Millisecond) // both wait on the slow page now
	cancelledAt := time.Now()
	cancel()
	select {
	case err := <-cancelledDone:
		if took := time.Since(cancelledAt); took > latency/2 {
			t.Errorf("cancelled Get() returned %v after cancel; want promptly", took)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Get() error = %v; want one wrapping context.Canceled", err)
		}
	case <-time.After(latency / 2):
		t.Fatalf("cancelled Get() still waiting %v after cancel; want it to return promptly", latency/2)
	}

	snap := <-patient
	if diff := cmp.Diff(want, serverIDs(snap)); diff != "" {
		t.Errorf("the patient caller's listing mismatch (-want +got):\n%s", diff)
	}
	if got := fake.Count(listServers); got != 1 {
		t.Errorf("made %d listing requests; want 1: the cancelled caller must not stop the shared listing", got)
	}
	if c.Current() != snap {
		t.Errorf("Current() is not the listing's snapshot")
	}
}

func TestGetWithEndedContextDoesNotList(t *testing.T) {
	fake, client, clock := newFake(t)
	c := New(&client.Server, WithClock(clock))
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled ctx) error = %v; want one wrapping context.Canceled", err)
	}
	if got := fake.Count(listServers); got != 0 {
		t.Errorf("Get(cancelled ctx) made %d listing requests; want 0", got)
	}
}

func TestMutationsDuringAListingAreReapplied(t *testing.T) {
	fake, client, clock := newFake(t)
	kept := addServers(t, fake, "kept", 2, poolLabels("w", ""))
	deleted := addServers(t, fake, "deleted", 1, poolLabels("w", ""))[0]
	changed := addServers(t, fake, "changed", 1, poolLabels("w", ""))[0]

	held := newHeldLister(&client.Server)
	c := New(held, WithClock(clock))
	defer c.Close()

	// The first listing: nothing happens meanwhile.
	go func() { <-held.read; held.release <- struct{}{} }()
	before, err := c.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() error: %v", err)
	}

	// The second listing reads the API, then our create, delete and
	// status change complete before its result is in.
	type result struct {
		snap *Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := c.Refresh(t.Context())
		done <- result{snap, err}
	}()
	<-held.read

	created, err := fake.AddServer(hcloudtest.ServerInfo{Name: "created", Labels: poolLabels("w", "")})
	if err != nil {
		t.Fatal(err)
	}
	createdRec, ok := fake.ServerByID(created)
	if !ok {
		t.Fatalf("ServerByID(%d) found nothing", created)
	}
	c.Upsert(Server{ID: created, Name: "created", Pool: "w", Status: createdRec.Status, ServerType: createdRec.ServerType, Location: createdRec.Location, Created: createdRec.Created})
	if !fake.DeleteServerNow(deleted) {
		t.Fatalf("DeleteServerNow(%d) found nothing", deleted)
	}
	c.Remove(deleted)
	if err := fake.SetServerStatus(changed, hcloud.ServerStatusStopping); err != nil {
		t.Fatal(err)
	}
	changedRec := *before.ByID(changed)
	changedRec.Status = hcloud.ServerStatusStopping
	c.Upsert(changedRec)

	// Our changes are visible at once, before any listing ends.
	wantIDs := slices.Concat(kept, []int64{changed, created})
	if diff := cmp.Diff(wantIDs, serverIDs(c.Current())); diff != "" {
		t.Errorf("Current() IDs right after Upsert/Remove mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(slices.Concat(kept, []int64{deleted, changed}), serverIDs(before)); diff != "" {
		t.Errorf("an earlier snapshot changed (-want +got):\n%s", diff)
	}

	held.release <- struct{}{}
	res := <-done
	if res.err != nil {
		t.Fatalf("Refresh() error: %v", res.err)
	}
	if diff := cmp.Diff(wantIDs, serverIDs(res.snap)); diff != "" {
		t.Errorf("the listing lost a created or resurrected a deleted server (-want +got):\n%s", diff)
	}
	if got := res.snap.ByID(changed).Status; got != hcloud.ServerStatusStopping {
		t.Errorf("status of server %d after the listing = %q; want %q re-applied", changed, got, hcloud.ServerStatusStopping)
	}

	// The journal ended with that listing: the next one is the API's word.
	go func() { <-held.read; held.release <- struct{}{} }()
	if err := fake.SetServerStatus(changed, hcloud.ServerStatusOff); err != nil {
		t.Fatal(err)
	}
	after, err := c.Refresh(t.Context())
	if err != nil {
		t.Fatalf("Refresh() error: %v", err)
	}
	if got := after.ByID(changed).Status; got != hcloud.ServerStatusOff {
		t.Errorf("status of server %d after a clean listing = %q; want the API's %q", changed, got, hcloud.ServerStatusOff)
	}
}

func TestUpsertAndRemoveWithoutAListing(t *testing.T) {
	fake, client, clock := newFake(t)
	existing := addServers(t, fake, "w", 2, poolLabels("w", ""))
	c := New(&client.Server, WithClock(clock))
	defer c.Close()

	c.Upsert(Server{ID: 1000, Name: "early", Pool: "w"})
	c.Remove(existing[0])
	if got := c.Current(); got != nil {
		t.Errorf("Current() before the first listing = %v; want nil: changes before it are in the API already", serverIDs(got))
	}
	if _, err := c.Get(t.Context()); err != nil {
		t.Fatalf("Get() error: %v", err)
	}
	listings := fake.Count(listServers)

	const newID, foreignID = 1 << 40, 1<<40 + 1 // above the fake's IDs
	c.Upsert(FromHCloud(&hcloud.Server{ID: newID, Name: "new", Status: hcloud.ServerStatusInitializing, Labels: poolLabels("w", "")}))
	c.Upsert(FromHCloud(&hcloud.Server{ID: foreignID, Name: "foreign"})) // no pool: ignored
	c.Remove(existing[0])
	snap, err := c.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() error: %v", err)
	}
	if diff := cmp.Diff([]int64{existing[1], newID}, serverIDs(snap)); diff != "" {
		t.Errorf("server IDs after Upsert and Remove mismatch (-want +got):\n%s", diff)
	}
	if got := fake.Count(listServers); got != listings {
		t.Errorf("Upsert, Remove and a fresh Get made %d listing requests; want none", got-listings)
	}
}

func TestInvalidate(t *testing.T) {
	t.Run("next Get lists", func(t *testing.T) {
		fake, client, clock := newFake(t)
		c := New(&client.Server, WithClock(clock))
		defer c.Close()
		for range 2 {
			if _, err := c.Get(t.Context()); err != nil {
				t.Fatalf("Get() error: %v", err)
			}
		}
		c.Invalidate()
		if !c.ExpiresAt().IsZero() {
			t.Errorf("ExpiresAt() after Invalidate = %v; want zero", c.ExpiresAt())
		}
		if _, err := c.Get(t.Context()); err != nil {
			t.Fatalf("Get() error: %v", err)
		}
		if got := fake.Count(listServers); got != 2 {
			t.Errorf("Get, Get, Invalidate, Get made %d listings; want 2", got)
		}
	})
	t.Run("during a listing, its result is not fresh", func(t *testing.T) {
		fake, client, clock := newFake(t)
		held := newHeldLister(&client.Server)
		c := New(held, WithClock(clock))
		defer c.Close()
		done := make(chan error, 1)
		go func() {
			_, err := c.Get(t.Context())
			done <- err
		}()
		<-held.read
		id := addServers(t, fake, "late", 1, poolLabels("w", ""))[0] // created by someone else
		c.Invalidate()
		held.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatalf("Get() error: %v", err)
		}
		go func() { <-held.read; held.release <- struct{}{} }()
		snap, err := c.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error: %v", err)
		}
		if diff := cmp.Diff([]int64{id}, serverIDs(snap)); diff != "" {
			t.Errorf("Get() after an Invalidate during the listing mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestFailedListingBacksOff(t *testing.T) {
	fake, client, clock := newFake(t)
	want := addServers(t, fake, "w", 1, poolLabels("w", ""))
	c := New(&client.Server, WithClock(clock))
	defer c.Close()

	// server_error is not retried by hcloud-go: one request, one failure.
	fake.FailRequest(listServers, 1, hcloudtest.RequestFault{Code: "server_error"})
	_, err := c.Get(t.Context())
	if !hcloud.IsError(err, hcloud.ErrorCodeServerError) {
		t.Fatalf("Get() error = %v; want the API's server_error", err)
	}
	if c.Current() != nil {
		t.Errorf("Current() after a failed first listing = %v; want nil", serverIDs(c.Current()))
	}

	clock.Step(failureBackoff - time.Nanosecond)
	if _, err := c.Get(t.Context()); !hcloud.IsError(err, hcloud.ErrorCodeServerError) {
		t.Errorf("Get() during the backoff error = %v; want the last failure", err)
	}
	if got := fake.Count(listServers); got != 1 {
		t.Errorf("Get() during the backoff listed: %d requests; want 1", got)
	}

	clock.Step(time.Nanosecond)
	snap, err := c.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() after the backoff error: %v", err)
	}
	if diff := cmp.Diff(want, serverIDs(snap)); diff != "" {
		t.Errorf("server IDs mismatch (-want +got):\n%s", diff)
	}

	// Refresh and Invalidate do not wait for a backoff.
	fake.FailRequest(listServers, 1, hcloudtest.RequestFault{Code: "server_error"})
	if _, err := c.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh() with a failing API succeeded")
	}
	if _, err := c.Refresh(t.Context()); err != nil {
		t.Errorf("Refresh() right after a failure error = %v; want a new listing", err)
	}
	if got := fake.Count(listServers); got != 4 {
		t.Errorf("made %d listing requests; want 4", got)
	}
}

func TestBackoffDoublesUpToTheTTL(t *testing.T) {
	r := &refresher{ttl: 8 * time.Second}
	var got []time.Duration
	for r.failures = 1; r.failures <= 4; r.failures++ {
		got = append(got, r.backoffLocked())
	}
	want := []time.Duration{5 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff per consecutive failure mismatch (-want +got):\n%s", diff)
	}
}

func TestClose(t *testing.T) {
	fake, client, clock := newFake(t)
	fake.SetLatency(10 * time.Second)
	c := New(&client.Server, WithClock(clock))
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(t.Context())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)

	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close() did not stop the listing in flight")
	}
	if err := <-done; err == nil {
		t.Error("Get() whose listing Close stopped succeeded")
	}
	if _, err := c.Get(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Get() after Close error = %v; want ErrClosed", err)
	}
	if _, err := c.Refresh(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Refresh() after Close error = %v; want ErrClosed", err)
	}
}

func TestLogging(t *testing.T) {
	fake, client, clock := newFake(t)
	addServers(t, fake, "w", 2, poolLabels("w", ""))
	core, logs := observer.New(zapcore.DebugLevel)
	c := New(&client.Server, WithClock(clock), WithLogger(zap.New(core)))
	defer c.Close()

	if _, err := c.Get(t.Context()); err != nil {
		t.Fatalf("Get() error: %v", err)
	}
	fake.FailRequest(listServers, 1, hcloudtest.RequestFault{Code: "server_error"})
	if _, err := c.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh() with a failing API succeeded")
	}

	type entry struct {
		Level   zapcore.Level
		Logger  string
		Message string
	}
	var got []entry
	for _, e := range logs.All() {
		got = append(got, entry{e.Level, e.LoggerName, e.Message})
	}
	want := []entry{
		{zapcore.DebugLevel, "servercache", "listed servers"},
		{zapcore.WarnLevel, "servercache", "listing servers failed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log entries mismatch (-want +got):\n%s", diff)
	}
}
