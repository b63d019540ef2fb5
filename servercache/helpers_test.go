package servercache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// epoch is where every test's manual clock starts.
var epoch = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

const listServers = "GET /servers"

// newFake starts a fake API whose clock is the returned manual clock,
// which the tests also give the cache, so that a test steps through TTLs
// without sleeping.
func newFake(t testing.TB, opts ...hcloudtest.Option) (*hcloudtest.Server, *hcloud.Client, *testingclock.FakeClock) {
	t.Helper()
	clock := testingclock.NewFakeClock(epoch)
	fake := hcloudtest.NewServer(append([]hcloudtest.Option{hcloudtest.WithClock(clock)}, opts...)...)
	t.Cleanup(fake.Close)
	return fake, fake.Client(), clock
}

// poolLabels returns the labels of a server of pool in cluster ("" for
// no cluster label).
func poolLabels(pool, cluster string) map[string]string {
	l := map[string]string{config.LabelNodeGroup: pool}
	if cluster != "" {
		l[config.LabelCluster] = cluster
	}
	return l
}

// addServers adds n servers named <prefix>-<i> with labels directly to the
// fake's state and returns their IDs.
func addServers(t testing.TB, fake *hcloudtest.Server, prefix string, n int, labels map[string]string) []int64 {
	t.Helper()
	out := make([]int64, 0, n)
	for i := range n {
		id, err := fake.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: labels})
		if err != nil {
			t.Fatalf("AddServer(%s-%d) error: %v", prefix, i, err)
		}
		out = append(out, id)
	}
	return out
}

// seqRand returns the values in turn, then repeats the last; safe for
// concurrent use like the rand source of a Cache must be.
func seqRand(values ...float64) func() float64 {
	var mu sync.Mutex
	i := 0
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		v := values[min(i, len(values)-1)]
		i++
		return v
	}
}

// heldLister lists a page through the real client and then holds the
// result until released, so that a test can change the API and the cache while a
// listing that has already read the API is still in flight.
type heldLister struct {
	inner   ServerLister
	read    chan struct{} // receives once per listing, after the API answered
	release chan struct{} // the listing returns after a receive from here
}

func newHeldLister(inner ServerLister) *heldLister {
	return &heldLister{inner: inner, read: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldLister) List(ctx context.Context, opts hcloud.ServerListOpts) ([]*hcloud.Server, *hcloud.Response, error) {
	servers, resp, err := h.inner.List(ctx, opts)
	h.read <- struct{}{}
	<-h.release
	return servers, resp, err
}

// serverIDs returns the IDs of a snapshot's servers, nil for a nil snapshot.
func serverIDs(s *Snapshot) []int64 {
	if s == nil {
		return nil
	}
	return ids(s.All())
}
