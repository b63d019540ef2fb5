package pool

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Instances returns every unit of the pool, from memory (the cache's
// current snapshot and the pool's claims; no API call): the servers,
// sorted by ID, then the claims, sorted by request time and name.
//
//   - A server that a create flow of this process owns is Creating (also
//     while it is off between creation and power-on), or Deleting once its
//     claim was cancelled.
//   - A server we are deleting, or in status deleting, is Deleting.
//   - Any other server maps by its Hetzner status; see the package
//     documentation for the table.
//   - A claim without a server is Creating with its claim ID; a failed
//     claim is Creating with ErrorInfo until DeleteInstances removes it.
//
// Every unit that TargetSize counts appears here, as the autoscaler
// requires.
func (p *Pool) Instances() []Instance {
	out, st := p.view()
	p.publish(st)
	return out
}

// view returns the instances and the summary of one instant: both are
// built under one hold of p.mu from the snapshot read under it, so the
// target, the counts and the instances always agree.
func (p *Pool) view() ([]Instance, Status) {
	now := p.now()
	set := p.current()
	minSize, maxSize := set.bounds()
	st := Status{Name: p.cfg.Name, MinSize: minSize, MaxSize: maxSize, Removed: set.removed}
	p.mu.Lock()
	snap := p.viewLocked()
	var out []Instance
	if snap != nil {
		for _, s := range p.members(snap) {
			if _, owned := p.claims[s.Name]; owned {
				continue
			}
			out = append(out, p.serverInstanceLocked(s, now))
		}
	}
	claims := make([]*claim, 0, len(p.claims))
	for _, c := range p.claims {
		claims = append(claims, c)
		if !c.cancelled && c.phase != claimFailed {
			st.PendingClaims++
		}
	}
	slices.SortFunc(claims, func(a, b *claim) int {
		return cmp.Or(a.requested.Compare(b.requested), cmp.Compare(a.name, b.name))
	})
	for _, c := range claims {
		out = append(out, p.claimInstanceLocked(c))
	}
	st.Target = p.targetLocked(snap)
	p.mu.Unlock()

	for _, in := range out {
		switch in.State {
		case Running:
			st.Running++
		case Creating:
			st.Creating++
		case Deleting:
			st.Deleting++
		}
		if in.Error != nil {
			st.Failed++
			st.Errors = append(st.Errors, in)
		}
	}
	st.Unavailable = p.offerings.list()
	return out, st
}

func (p *Pool) serverInstanceLocked(s *servercache.Server, now time.Time) Instance {
	in := Instance{ID: s.ProviderID(), ServerID: s.ID, Name: s.Name, Status: s.Status, Replaces: replacesOf(s.Labels),
		Offering: config.Offering{ServerType: s.ServerType, Location: s.Location}}
	if _, ok := p.deleting[s.ID]; ok {
		in.State = Deleting
		return in
	}
	in.State, in.Error = serverState(s, now, p.opts.creationTimeout)
	return in
}

func (p *Pool) claimInstanceLocked(c *claim) Instance {
	in := Instance{ID: ClaimID(p.cfg.Name, c.name), State: Creating, Name: c.name, Replaces: c.replaces,
		Offering: config.Offering{ServerType: c.set.cfg.ServerType, Location: c.set.cfg.Location}}
	if c.serverID != 0 {
		in.ID = servercache.ProviderIDPrefix + strconv.FormatInt(c.serverID, 10)
		in.ServerID = c.serverID
		in.Status = c.status
	}
	switch {
	case c.cancelled:
		in.State = Deleting
	case c.phase == claimFailed:
		e := *c.err
		in.Error = &e
	}
	return in
}

// Status is a summary of a pool for the CLI and metrics.
type Status struct {
	Name    string
	MinSize int
	MaxSize int
	// Removed says the pool was removed from the configuration and only
	// shrinks ([Pool.Remove]).
	Removed bool
	Target  int
	// Running, Creating and Deleting count Instances by state; Failed
	// counts the instances with an error (also counted by state).
	Running, Creating, Deleting, Failed int
	// PendingClaims counts the claims that are neither failed nor
	// cancelled: requested servers that do not run yet.
	PendingClaims int
	// Errors lists the instances with an error.
	Errors []Instance
	// Unavailable lists the offerings remembered as unavailable.
	Unavailable []UnavailableError
}

// Status returns the pool's summary, from memory.
func (p *Pool) Status() Status {
	_, st := p.view()
	p.publish(st)
	return st
}

// observe refreshes the pool's gauges after a change.
func (p *Pool) observe() {
	_, st := p.view()
	p.publish(st)
}

// publish sets the pool's gauges; not after Close, which removed them.
func (p *Pool) publish(st Status) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	m := p.metrics
	m.PoolTargetSize.WithLabelValues(p.cfg.Name).Set(float64(st.Target))
	m.PoolPendingClaims.WithLabelValues(p.cfg.Name).Set(float64(st.PendingClaims))
	m.PoolInstances.WithLabelValues(p.cfg.Name, "running").Set(float64(st.Running))
	m.PoolInstances.WithLabelValues(p.cfg.Name, "creating").Set(float64(st.Creating))
	m.PoolInstances.WithLabelValues(p.cfg.Name, "deleting").Set(float64(st.Deleting))
	m.PoolInstances.WithLabelValues(p.cfg.Name, "failed").Set(float64(st.Failed))
}

// CreatesNode reports whether the server behind a node belongs to a create
// flow of this pool: its provider ID is "hcloud://<id>" of a server whose
// create request has returned, or, for a node without a provider ID, its
// name is the server name of a claim. Instances reports such a server
// before any listing shows it, so a Cluster maps it to the pool with this.
// It answers from memory, in time linear in the pool's claims.
func (p *Pool) CreatesNode(providerID, nodeName string) bool {
	var id int64
	if providerID != "" {
		var ok bool
		if id, ok = servercache.ParseProviderID(providerID); !ok {
			return false
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if providerID == "" {
		return p.claims[nodeName] != nil
	}
	for _, c := range p.claims {
		if c.serverID == id {
			return true
		}
	}
	return false
}
