package servercache

import (
	"sync"
	"time"
)

// DepartedRetention is how long [Cache.Departed] remembers a server that
// [Cache.Remove] dropped. The autoscaler keeps the instances of each node
// group in a cache it refreshes every 2 minutes
// (clusterstate/utils/node_instances_cache.go), and looks up the node group
// of every cached instance that has no Node each loop (clusterstate's
// updateReadinessStats and the core's oldUnregisteredNodes): a deleted
// server stays there up to that long, and its Node object until the cloud
// controller manager removes it.
const DepartedRetention = 5 * time.Minute

// departed remembers the pools of servers removed from the snapshot.
type departed struct {
	mu     sync.Mutex
	byID   map[int64]departure
	byName map[string]departure
}

type departure struct {
	pool string
	at   time.Time
}

// record remembers the servers of s among ids, and forgets those older
// than the retention.
func (d *departed) record(s *Snapshot, ids []int64, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID == nil {
		d.byID, d.byName = map[int64]departure{}, map[string]departure{}
	}
	for id, dep := range d.byID {
		if now.Sub(dep.at) > DepartedRetention {
			delete(d.byID, id)
		}
	}
	for name, dep := range d.byName {
		if now.Sub(dep.at) > DepartedRetention {
			delete(d.byName, name)
		}
	}
	if s == nil {
		return
	}
	for _, id := range ids {
		if srv := s.ByID(id); srv != nil && srv.Pool != "" {
			dep := departure{pool: srv.Pool, at: now}
			d.byID[id], d.byName[srv.Name] = dep, dep
		}
	}
}

// Departed returns the pool of a server that [Cache.Remove] dropped within
// [DepartedRetention] (our own delete completed), found as
// [Snapshot.ByNode] finds a server: by the provider ID hcloud://<id>, or
// by the node name when the provider ID is empty. Its Node, or the
// autoscaler's cached instance of it, can still exist that long, and the
// autoscaler asks for its node group.
func (c *Cache) Departed(providerID, nodeName string) (pool string, ok bool) {
	c.gone.mu.Lock()
	defer c.gone.mu.Unlock()
	var dep departure
	if providerID == "" {
		dep, ok = c.gone.byName[nodeName]
	} else if id, valid := ParseProviderID(providerID); valid {
		dep, ok = c.gone.byID[id]
	}
	if !ok || c.clock.Since(dep.at) > DepartedRetention {
		return "", false
	}
	return dep.pool, true
}
