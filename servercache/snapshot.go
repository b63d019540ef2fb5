package servercache

import (
	"cmp"
	"slices"
	"time"
)

// Snapshot is an immutable view of the cluster's servers with indexes by
// ID, name and pool, built once per listing. It is safe to share between
// goroutines; the records and slices it returns are shared too and must
// not be modified.
type Snapshot struct {
	all       []*Server // sorted by ID
	byID      map[int64]*Server
	byName    map[string]*Server
	pools     map[string][]*Server // each sorted by ID
	fetchedAt time.Time
}

// newSnapshot indexes servers. It takes ownership of the slice and keeps
// only servers with a pool and a positive ID.
func newSnapshot(servers []*Server, fetchedAt time.Time) *Snapshot {
	servers = slices.DeleteFunc(servers, func(s *Server) bool {
		return s.ID <= 0 || s.Pool == ""
	})
	slices.SortFunc(servers, func(a, b *Server) int { return cmp.Compare(a.ID, b.ID) })
	// Duplicates come only from a caller that upserts one ID twice in one
	// call; the later record is the newer one.
	servers = compactByID(servers)

	s := &Snapshot{
		all:       servers,
		byID:      make(map[int64]*Server, len(servers)),
		byName:    make(map[string]*Server, len(servers)),
		pools:     make(map[string][]*Server),
		fetchedAt: fetchedAt,
	}
	counts := make(map[string]int)
	for _, srv := range servers {
		s.byID[srv.ID] = srv
		// Names are unique in a project, but a server we deleted may still
		// be here when its successor of the same name arrives; ascending ID
		// order lets the newer one win.
		s.byName[srv.Name] = srv
		counts[srv.Pool]++
	}
	for _, srv := range servers {
		p := s.pools[srv.Pool]
		if p == nil {
			p = make([]*Server, 0, counts[srv.Pool])
		}
		s.pools[srv.Pool] = append(p, srv)
	}
	return s
}

// compactByID keeps the last of each run of equal IDs in a sorted slice.
func compactByID(servers []*Server) []*Server {
	out := servers[:0]
	for i, srv := range servers {
		if i+1 < len(servers) && servers[i+1].ID == srv.ID {
			continue
		}
		out = append(out, srv)
	}
	clear(servers[len(out):])
	return out
}

// with returns a copy of s with m applied: its servers added or replaced,
// then its IDs removed. s itself is unchanged.
func (s *Snapshot) with(m mutation) *Snapshot {
	changed := make(map[int64]struct{}, len(m.upserts)+len(m.removes))
	for i := range m.upserts {
		changed[m.upserts[i].ID] = struct{}{}
	}
	for _, id := range m.removes {
		changed[id] = struct{}{}
	}
	servers := make([]*Server, 0, len(s.all)+len(m.upserts))
	for _, srv := range s.all {
		if _, ok := changed[srv.ID]; !ok {
			servers = append(servers, srv)
		}
	}
	removed := make(map[int64]struct{}, len(m.removes))
	for _, id := range m.removes {
		removed[id] = struct{}{}
	}
	for i := range m.upserts {
		if _, ok := removed[m.upserts[i].ID]; ok {
			continue
		}
		srv := m.upserts[i]
		servers = append(servers, &srv)
	}
	return newSnapshot(servers, s.fetchedAt)
}

// mutation is one Upsert or Remove call: our own change to the servers,
// known before any listing can show it.
type mutation struct {
	upserts []Server
	removes []int64
}

// ByID returns the server with the given ID, or nil.
func (s *Snapshot) ByID(id int64) *Server {
	return s.byID[id]
}

// ByName returns the server with the given name, or nil.
func (s *Snapshot) ByName(name string) *Server {
	return s.byName[name]
}

// ByNode returns the server behind a Kubernetes node, or nil when the node
// is not one of the cluster's servers.
//
// A providerID of the form "hcloud://<id>" is looked up by server ID only;
// an empty providerID (a node whose cloud controller has not run yet) is
// looked up by node name only. Any other providerID, such as a Robot
// server's "hrobot://<n>" or "hcloud://bm-<n>", belongs to no server. A
// numeric ID is never compared with server names, so a node of server 42
// cannot be mistaken for a server named "42".
func (s *Snapshot) ByNode(providerID, nodeName string) *Server {
	if providerID == "" {
		return s.byName[nodeName]
	}
	id, ok := ParseProviderID(providerID)
	if !ok {
		return nil
	}
	return s.byID[id]
}

// Pool returns the servers of one pool sorted by ID, or nil for a pool
// without servers. The slice is shared: do not modify it.
func (s *Snapshot) Pool(name string) []*Server {
	return s.pools[name]
}

// All returns every server sorted by ID. The slice is shared: do not
// modify it.
func (s *Snapshot) All() []*Server {
	return s.all
}

// Len returns the number of servers.
func (s *Snapshot) Len() int {
	return len(s.all)
}

// FetchedAt returns when the listing behind the snapshot started: no server
// change before that time is missing from it. Upsert and Remove keep it.
func (s *Snapshot) FetchedAt() time.Time {
	return s.fetchedAt
}
