package pool

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Family joins the node groups of one configured pool, one per offering
// (config.Pool.OfferingGroups): they share the pool's servers (all carry
// its config.LabelNodeGroup label), its min and its max.
//
// A server belongs to the configured group of its server type and
// location, the first offering's too. The group of a later offering taken
// out of the list is removed (min 0, max its size, no scale-up, see
// [Pool.Remove]) and keeps the servers created for it
// (config.LabelOffering) that still run on it until they are gone; a
// Cluster started without the offering, or reloaded without it after it
// was the first, builds that removed group again for such servers, so a
// restart and a reload agree. Any other server on
// no offering of the pool (its type changed since it was created, or it
// was created for the first offering, or by the upstream provider)
// belongs to the first offering's group, as it did before the pool had
// offerings, where drift reports it.
//
// The bounds hold across the family: every check of a member's max
// (IncreaseSize, AtomicIncreaseSize, Surge) and min (DeleteInstances)
// runs under mu and counts the other members' targets and deletes in
// flight, so two groups scaled at once never take the pool past its max
// nor below its min. mu is taken before a member's own lock, never while
// one is held.
type Family struct {
	name string
	mu   sync.Mutex // serialises the members' bound checks
	// members is replaced, never changed, when a pool joins or leaves;
	// read without a lock.
	members atomic.Pointer[[]*Pool]
	joinMu  sync.Mutex // guards replacing members
}

// NewFamily returns an empty family for the pool of that name. Give it to
// the pool of every offering with [WithFamily].
func NewFamily(name string) *Family {
	f := &Family{name: name}
	f.members.Store(&[]*Pool{})
	return f
}

// Name returns the name of the family's pool.
func (f *Family) Name() string { return f.name }

// Members returns the family's node groups in the order of the first
// offering's configured offerings, then any others (removed offerings).
func (f *Family) Members() []*Pool {
	ms := slices.Clone(*f.members.Load())
	var order []config.Offering
	for _, m := range ms {
		if m.cfg.Name == f.name {
			order = m.current().cfg.PoolOfferings()
		}
	}
	rank := func(p *Pool) int {
		set := p.current()
		if i := slices.Index(order, config.Offering{ServerType: set.cfg.ServerType, Location: set.cfg.Location}); i >= 0 && (i == 0) == (p.cfg.Name == f.name) {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(ms, func(a, b *Pool) int { return rank(a) - rank(b) })
	return ms
}

func (f *Family) join(p *Pool) {
	f.joinMu.Lock()
	defer f.joinMu.Unlock()
	ms := append(slices.Clone(*f.members.Load()), p)
	f.members.Store(&ms)
}

func (f *Family) leave(p *Pool) {
	f.joinMu.Lock()
	defer f.joinMu.Unlock()
	ms := slices.DeleteFunc(slices.Clone(*f.members.Load()), func(m *Pool) bool { return m == p })
	f.members.Store(&ms)
}

// owner returns the member a listed server of the family belongs to, nil
// when no member takes it.
func (f *Family) owner(s *servercache.Server) *Pool {
	var first, removed *Pool
	for _, m := range *f.members.Load() {
		set := m.current()
		if m.cfg.Name == f.name {
			first = m
		}
		if set.cfg.ServerType != s.ServerType || set.cfg.Location != s.Location {
			continue
		}
		if !set.removed {
			// A configured offering, the first too: a reload that made
			// a later offering the first gives it that group's servers.
			return m
		}
		if m.cfg.Name == f.name || CreatedFor(s, set.cfg.ServerType, set.cfg.Location) {
			removed = m
		}
	}
	if removed != nil {
		return removed
	}
	return first
}

// CreatedFor reports whether a listed server was created for the offering
// of serverType in location as a later offering of its pool and still
// runs on it: its config.LabelOffering is "<serverType>-<location>" and
// so are its type and location. It allocates nothing.
func CreatedFor(s *servercache.Server, serverType, location string) bool {
	v := s.Labels[config.LabelOffering]
	return s.ServerType == serverType && s.Location == location &&
		len(v) == len(serverType)+1+len(location) && strings.HasPrefix(v, serverType) &&
		v[len(serverType)] == '-' && strings.HasSuffix(v, location)
}

// lockFamily takes the family's check lock; the returned func releases
// it and may be called again, doing nothing. A pool without a family
// locks nothing.
func (p *Pool) lockFamily() func() {
	if p.family == nil {
		return func() {}
	}
	p.family.mu.Lock()
	return sync.OnceFunc(p.family.mu.Unlock)
}

// others returns what the family's other members hold: their targets and
// their deletes in flight. Call it with the family's lock held (it takes
// each member's own lock in turn) and without p.mu.
func (p *Pool) others() (target, deleting int) {
	if p.family == nil {
		return 0, 0
	}
	for _, m := range *p.family.members.Load() {
		if m == p {
			continue
		}
		t, d := m.used()
		target += t
		deleting += d
	}
	return target, deleting
}

// othersHealthy returns the targets of the family's other members less
// their failed creations, which hold no capacity. Call it with the
// family's lock held and without p.mu.
func (p *Pool) othersHealthy() int {
	n := 0
	if p.family != nil {
		for _, m := range *p.family.members.Load() {
			if m != p {
				n += m.healthy()
			}
		}
	}
	return n
}

// healthy returns the pool's target less its failed creations.
func (p *Pool) healthy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := p.viewLocked()
	return p.targetLocked(snap) - p.failedLocked(snap, p.now())
}

// used returns the pool's target and its deletes in flight, as of one
// instant.
func (p *Pool) used() (target, deleting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := p.viewLocked()
	return p.targetLocked(snap), p.deletesInFlightLocked(snap)
}

// Family returns the node groups of the pool's offerings (see [Family]):
// the pool alone when it has no family.
func (p *Pool) Family() []*Pool {
	if p.family == nil {
		return []*Pool{p}
	}
	return p.family.Members()
}

// OwnerOf returns the node group of the pool's family that a listed
// server of the family belongs to (see [Family]): p itself when it has no
// family, nil when no group takes it. It takes no lock and allocates
// nothing.
func (p *Pool) OwnerOf(s *servercache.Server) *Pool {
	if p.family == nil {
		return p
	}
	return p.family.owner(s)
}

// member reports whether a listed server is one of the pool's.
func (p *Pool) member(s *servercache.Server) bool {
	if p.family == nil {
		return s.Pool == p.cfg.Name
	}
	return s.Pool == p.family.name && p.family.owner(s) == p
}

// members returns the pool's servers in snap.
func (p *Pool) members(snap *servercache.Snapshot) []*servercache.Server {
	if p.family == nil {
		return snap.Pool(p.cfg.Name)
	}
	all := snap.Pool(p.family.name)
	if len(*p.family.members.Load()) == 1 {
		return all
	}
	out := make([]*servercache.Server, 0, len(all))
	for _, s := range all {
		if p.family.owner(s) == p {
			out = append(out, s)
		}
	}
	return out
}

// Available reports whether the pool's offering may be scaled up now: it
// is configured and no capacity error (or sold-out catalogue entry) of its
// server type in its location, or of its placement group, is remembered.
func (p *Pool) Available() bool {
	set := p.current()
	return !set.removed && p.offerings.check(set.cfg.ServerType, set.cfg.Location, placementKey(&set.cfg)) == nil
}

// multi reports whether the pool is one of several offerings.
func (p *Pool) multi() bool { return p.family != nil && len(*p.family.members.Load()) > 1 }

// firstAvailable returns the member of the family on the first offering
// that is configured and not remembered as unavailable; the first
// offering's member when none is.
func (p *Pool) firstAvailable() *Pool {
	ms := p.family.Members()
	for _, m := range ms {
		set := m.current()
		if !set.removed && m.offerings.check(set.cfg.ServerType, set.cfg.Location, placementKey(&set.cfg)) == nil {
			return m
		}
	}
	if len(ms) > 0 {
		return ms[0]
	}
	return p
}

// EarlierAvailable returns the node group of the first offering of the
// pool's family, in the user's current order, that comes before p's own
// and is available now ([Pool.Available]: configured, and no capacity
// error or sold-out catalogue entry remembered); nil when there is none:
// p has no family, is the first offering, or every earlier offering is
// sold out. A removed offering's group has no place in the order: it
// returns the first available offering. It takes no pool's lock.
func (p *Pool) EarlierAvailable() *Pool {
	if !p.multi() {
		return nil
	}
	for _, m := range p.family.Members() {
		if m == p {
			return nil
		}
		if m.Available() {
			return m
		}
	}
	return nil
}

// familyBounds returns the min and max size the pool reports: those of its
// configuration for a pool of one offering; for one of several, the
// pool's max less what the other offerings hold, and the pool's min split
// over its offerings (see [Family] and minShare). An offering remembered
// as unavailable reports its target as max, so the autoscaler skips it
// without a failed scale-up. The min is never above the max.
func (p *Pool) familyBounds() (minSize, maxSize int) {
	set := p.current()
	minSize, maxSize = set.bounds()
	if !p.multi() {
		return minSize, maxSize
	}
	unlock := p.lockFamily()
	defer unlock()
	oT, oD := p.others()
	own := p.TargetSize()
	maxSize = max(own, maxSize-oT-oD)
	if set.removed || p.offerings.check(set.cfg.ServerType, set.cfg.Location, placementKey(&set.cfg)) != nil {
		maxSize = own
	}
	return min(p.minShare(), maxSize), maxSize
}

// minShare returns the part of the pool's min that p's group holds. The
// autoscaler keeps each group at its MinSize on its
// own (core/scaledown/unneeded/nodes.go verifyMinSize), so the shares add
// up to the pool's min: the configured offerings, in order, each hold as
// much of it as their healthy targets (failed creates hold no capacity)
// cover; the first available offering also
// holds what none covers (so --enforce-node-group-min-size adds the
// missing nodes once, there). A removed offering holds none: its servers
// go first. Call it with the family's lock held and without p.mu.
func (p *Pool) minShare() int {
	if p.current().removed {
		return 0
	}
	left, _ := p.current().bounds() // every offering's is the pool's min
	share := 0
	for _, m := range p.family.Members() {
		if m.current().removed {
			continue
		}
		t := m.healthy()
		if m == p {
			share = min(t, left)
		}
		left -= min(t, left)
	}
	if left > 0 && p.firstAvailable() == p {
		share += left
	}
	return share
}
