package servercache

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var fetchTime = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func snapshotOf(servers ...Server) *Snapshot {
	ptrs := make([]*Server, len(servers))
	for i := range servers {
		ptrs[i] = &servers[i]
	}
	return newSnapshot(ptrs, fetchTime)
}

// ids lists the IDs of servers, for compact comparisons.
func ids(servers []*Server) []int64 {
	out := make([]int64, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.ID)
	}
	return out
}

func TestSnapshotByNode(t *testing.T) {
	snap := snapshotOf(
		Server{ID: 7, Name: "workers-7", Pool: "workers"},
		// Named like another server's ID: upstream's "name or ID" lookup
		// confused the two.
		Server{ID: 8, Name: "7", Pool: "workers"},
		Server{ID: 42, Name: "gpu-1", Pool: "gpu"},
	)
	tests := []struct {
		name       string
		providerID string
		nodeName   string
		wantID     int64 // 0: no server
	}{
		{"provider ID", "hcloud://42", "anything", 42},
		{"provider ID wins over node name", "hcloud://7", "gpu-1", 7},
		{"provider ID of no server", "hcloud://1000", "workers-7", 0},
		{"numeric provider ID never matches a name", "hcloud://8", "", 8},
		{"provider ID 7 is server 7, not the server named 7", "hcloud://7", "", 7},
		{"empty provider ID: by node name", "", "gpu-1", 42},
		{"empty provider ID: numeric node name is a name", "", "7", 8},
		{"empty provider ID: no such name", "", "42", 0},
		{"robot provider ID", "hrobot://7", "workers-7", 0},
		{"legacy robot provider ID", "hcloud://bm-7", "workers-7", 0},
		{"other cloud's provider ID", "aws:///eu-central-1a/i-7", "workers-7", 0},
		{"non-canonical number", "hcloud://007", "workers-7", 0},
		{"nothing", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := snap.ByNode(tt.providerID, tt.nodeName)
			var gotID int64
			if got != nil {
				gotID = got.ID
			}
			if gotID != tt.wantID {
				t.Errorf("ByNode(%q, %q) = server %d; want %d (0: none)", tt.providerID, tt.nodeName, gotID, tt.wantID)
			}
		})
	}
}

func TestSnapshotIndexes(t *testing.T) {
	snap := snapshotOf(
		Server{ID: 30, Name: "b-30", Pool: "b"},
		Server{ID: 10, Name: "a-10", Pool: "a"},
		Server{ID: 0, Name: "no-id", Pool: "a"},
		Server{ID: 20, Name: "a-20", Pool: "a"},
		Server{ID: 40, Name: "unlabelled"},
	)
	if diff := cmp.Diff([]int64{10, 20, 30}, ids(snap.All())); diff != "" {
		t.Errorf("All() IDs mismatch (-want +got):\n%s", diff)
	}
	if got := snap.Len(); got != 3 {
		t.Errorf("Len() = %d; want 3", got)
	}
	if diff := cmp.Diff([]int64{10, 20}, ids(snap.Pool("a"))); diff != "" {
		t.Errorf("Pool(a) IDs mismatch (-want +got):\n%s", diff)
	}
	if got := snap.Pool("missing"); got != nil {
		t.Errorf("Pool(missing) = %v; want nil", ids(got))
	}
	if got := snap.ByID(40); got != nil {
		t.Errorf("ByID(40) = %+v; want nil for a server without a pool", got)
	}
	if got := snap.ByName("unlabelled"); got != nil {
		t.Errorf("ByName(unlabelled) = %+v; want nil for a server without a pool", got)
	}
	if got := snap.ByName("a-20"); got == nil || got.ID != 20 {
		t.Errorf("ByName(a-20) = %+v; want server 20", got)
	}
	if got := snap.FetchedAt(); !got.Equal(fetchTime) {
		t.Errorf("FetchedAt() = %v; want %v", got, fetchTime)
	}
}

func TestSnapshotWith(t *testing.T) {
	base := []Server{
		{ID: 1, Name: "w-1", Pool: "w", Status: "running"},
		{ID: 2, Name: "w-2", Pool: "w", Status: "running"},
	}
	tests := []struct {
		name      string
		m         mutation
		wantAll   []Server
		wantNames map[string]int64
	}{
		{
			name:    "upsert adds",
			m:       mutation{upserts: []Server{{ID: 3, Name: "w-3", Pool: "w", Status: "initializing"}}},
			wantAll: []Server{base[0], base[1], {ID: 3, Name: "w-3", Pool: "w", Status: "initializing"}},
		},
		{
			name:    "upsert replaces",
			m:       mutation{upserts: []Server{{ID: 2, Name: "w-2", Pool: "w", Status: "off"}}},
			wantAll: []Server{base[0], {ID: 2, Name: "w-2", Pool: "w", Status: "off"}},
		},
		{
			name:    "upsert without a pool removes",
			m:       mutation{upserts: []Server{{ID: 2, Name: "w-2"}}},
			wantAll: []Server{base[0]},
		},
		{
			name:    "later upsert of one ID in one call wins",
			m:       mutation{upserts: []Server{{ID: 4, Name: "w-4", Pool: "w", Status: "initializing"}, {ID: 4, Name: "w-4", Pool: "w", Status: "running"}}},
			wantAll: []Server{base[0], base[1], {ID: 4, Name: "w-4", Pool: "w", Status: "running"}},
		},
		{
			name:    "remove",
			m:       mutation{removes: []int64{1, 99}},
			wantAll: []Server{base[1]},
		},
		{
			name:      "a new server of a reused name wins the name index",
			m:         mutation{upserts: []Server{{ID: 5, Name: "w-1", Pool: "w", Status: "initializing"}}},
			wantAll:   []Server{base[0], base[1], {ID: 5, Name: "w-1", Pool: "w", Status: "initializing"}},
			wantNames: map[string]int64{"w-1": 5, "w-2": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := snapshotOf(base...)
			got := old.with(tt.m)
			if diff := cmp.Diff(tt.wantAll, deref(got.All())); diff != "" {
				t.Errorf("All() after with mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(base, deref(old.All())); diff != "" {
				t.Errorf("the old snapshot changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ids(got.All()), ids(got.Pool("w"))); diff != "" {
				t.Errorf("Pool(w) disagrees with All() (-all +pool):\n%s", diff)
			}
			for _, s := range got.All() {
				if got.ByID(s.ID) != s {
					t.Errorf("ByID(%d) does not return the record of All()", s.ID)
				}
			}
			if tt.wantNames != nil {
				for name, id := range tt.wantNames {
					if s := got.ByName(name); s == nil || s.ID != id {
						t.Errorf("ByName(%q) = %+v; want server %d", name, s, id)
					}
				}
			}
			if !got.FetchedAt().Equal(fetchTime) {
				t.Errorf("FetchedAt() = %v; want the listing's %v", got.FetchedAt(), fetchTime)
			}
		})
	}
}

func deref(servers []*Server) []Server {
	out := make([]Server, len(servers))
	for i, s := range servers {
		out[i] = *s
	}
	return out
}

func TestSnapshotLookupsDoNotAllocate(t *testing.T) {
	snap := snapshotOf(Server{ID: 7, Name: "w-7", Pool: "w"})
	lookups := map[string]func(){
		"ByNode provider ID": func() { snap.ByNode("hcloud://7", "w-7") },
		"ByNode robot":       func() { snap.ByNode("hrobot://7", "w-7") },
		"ByNode node name":   func() { snap.ByNode("", "w-7") },
		"ByID":               func() { snap.ByID(7) },
		"ByName":             func() { snap.ByName("w-7") },
		"Pool":               func() { snap.Pool("w") },
	}
	for name, f := range lookups {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %v times per call; want 0", name, allocs)
		}
	}
}
