package servercache

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// afterPage runs a change to the fake once, right after the answer to
// the given page of GET /servers reached the client: between two page
// requests of one listing.
type afterPage struct {
	next http.RoundTripper
	page string
	do   func()

	once sync.Once
}

func (a *afterPage) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && req.URL.Path == "/v1/servers" && req.URL.Query().Get("page") == a.page {
		a.once.Do(a.do)
	}
	return resp, err
}

// TestListingCannotMissAServer changes the project between the pages of
// one listing. Whatever changes, every server that exists from the start
// of the listing to its end is in the snapshot; a server deleted during
// the listing may or may not be.
func TestListingCannotMissAServer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		afterPage string
		// change deletes and adds servers and returns the deleted IDs;
		// ids are the 150 servers of the project in ID order.
		change    func(fake *hcloudtest.Server, ids []int64) []int64
		wantExtra int // requests beyond the 3 pages
	}{
		{
			name: "nothing changes", afterPage: "1",
			change:    func(*hcloudtest.Server, []int64) []int64 { return nil },
			wantExtra: 0,
		},
		{
			// Offset paging would skip ids[50], which slides onto page 1.
			name: "a server on a page already read is deleted", afterPage: "1",
			change: func(fake *hcloudtest.Server, ids []int64) []int64 {
				fake.DeleteServerNow(ids[10])
				return ids[10:11]
			},
			wantExtra: 2, // page 1 again, then page 2 again
		},
		{
			name: "a server on a page not yet read is deleted", afterPage: "1",
			change: func(fake *hcloudtest.Server, ids []int64) []int64 {
				fake.DeleteServerNow(ids[120])
				return ids[120:121]
			},
			wantExtra: 2,
		},
		{
			// 60 servers of pages 1 and 2 go: the first unseen server is
			// now on page 1, two pages back.
			name: "more than a page of servers already read is deleted", afterPage: "2",
			change: func(fake *hcloudtest.Server, ids []int64) []int64 {
				for _, id := range ids[20:80] {
					fake.DeleteServerNow(id)
				}
				return ids[20:80]
			},
			wantExtra: 3, // page 2 (empty of unseen), page 1, page 2 again; page 3 becomes empty of servers
		},
		{
			name: "servers are created", afterPage: "1",
			change: func(fake *hcloudtest.Server, ids []int64) []int64 {
				addServers(t, fake, "late", 3, poolLabels("w", ""))
				return nil
			},
			wantExtra: 3, // page 1 and 2 again, and a fourth page with the new servers
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, _, clock := newFake(t, hcloudtest.WithRateLimit(0, 0))
			ids := addServers(t, fake, "w", 150, poolLabels("w", ""))
			hook := &afterPage{next: http.DefaultTransport, page: tc.afterPage}
			var deleted []int64
			hook.do = func() { deleted = tc.change(fake, ids) }
			client := fake.Client(hcloud.WithHTTPClient(&http.Client{Transport: hook}))
			c := New(&client.Server, WithClock(clock))
			defer c.Close()

			snap, err := c.Get(t.Context())
			if err != nil {
				t.Fatalf("Get() error: %v", err)
			}
			now, err := fake.Servers("hcloud/node-group")
			if err != nil {
				t.Fatal(err)
			}
			var missing []int64
			for _, s := range now {
				if snap.ByID(s.ID) == nil {
					missing = append(missing, s.ID)
				}
			}
			if len(missing) > 0 {
				t.Errorf("servers that exist throughout are missing from the listing: %v", missing)
			}
			for _, s := range snap.All() {
				if _, ok := fake.ServerByID(s.ID); !ok && !slices.Contains(deleted, s.ID) {
					t.Errorf("server %d in the listing never existed", s.ID)
				}
			}
			if diff := cmp.Diff(3+tc.wantExtra, fake.Count(listServers)); diff != "" {
				t.Errorf("GET /servers requests (-want +got):\n%s", diff)
			}
		})
	}
}
