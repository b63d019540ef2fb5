package hcloudscale

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// poolSet is the configuration a Cluster runs and its pools. It is never
// modified once stored: Reconfigure stores a new one.
type poolSet struct {
	cfg *config.Config
	// list holds the pools of cfg in its order, then the pools removed
	// from the configuration that still have servers.
	list   []*pool.Pool
	byName map[string]*pool.Pool
	// generation counts the sets a Cluster stored.
	generation uint64
}

// storePools makes next the Cluster's pool set. Callers hold
// reconfigureMu, or are New.
func (c *Cluster) storePools(next *poolSet) {
	if old := c.pools.Load(); old != nil {
		next.generation = old.generation + 1
	}
	c.pools.Store(next)
}

// Generation changes whenever the Cluster's pools or a pool's
// configuration change ([Cluster.Reconfigure], a removed pool dropped at
// Refresh), so that a caller that keeps something per pool knows when
// to look at [Cluster.Pools] again. It is a load of one word.
func (c *Cluster) Generation() uint64 { return c.pools.Load().generation }

// with returns a copy of s with p added at the end.
func (s *poolSet) with(p *pool.Pool) *poolSet {
	next := &poolSet{cfg: s.cfg, list: append(slices.Clone(s.list), p), byName: make(map[string]*pool.Pool, len(s.byName)+1)}
	for name, q := range s.byName {
		next.byName[name] = q
	}
	next.byName[p.Name()] = p
	return next
}

// forServer returns the node group a listed server belongs to: among the
// groups of its pool's offerings, the one of its server type and
// location; the pool's first offering when none is (see [pool.Family]).
func (s *poolSet) forServer(srv *servercache.Server) *pool.Pool {
	first := s.byName[srv.Pool]
	if first == nil {
		return nil
	}
	if p := first.OwnerOf(srv); p != nil {
		return p
	}
	return first
}

// Reconfigure makes cfg the Cluster's configuration, all or nothing. It
// checks cfg as [New] does: [config.Config.Validate], then every
// reference against the API (network and subnets, firewalls, SSH keys,
// placement groups, server types in their locations, images). Any problem
// is returned, all of them at once, and nothing changes.
//
// Settings the Cluster as a whole is built on cannot change without a
// restart: the token, the endpoint, the cluster name and the creation
// timeout; a change of one is an error naming it.
//
// On success:
//   - a pool new to cfg is added: [Cluster.Pools] and the autoscaler's
//     node groups list it from now on;
//   - a pool in both takes cfg's settings ([pool.Pool.Reconfigure]): its
//     bounds apply to the next scale-up and delete, its server settings to
//     the servers of claims made from now on. Claims and create flows in
//     flight finish as they began; no server is changed or deleted, also
//     when the max size drops below the current size;
//   - a pool missing from cfg is removed ([pool.Pool.Remove]): it stays a
//     pool with min and max size 0 that refuses scale-ups, so the
//     autoscaler deletes its nodes as they become unneeded, never at once.
//     Once it has no server left, [Cluster.Refresh] drops it. A pool that
//     comes back before that is configured again.
//
// Reconfigure calls are serialised; the Cluster's other methods run
// alongside and see either the old configuration or the new one.
func (c *Cluster) Reconfigure(ctx context.Context, cfg *config.Config) error {
	if cfg == nil {
		return errors.New("config is nil")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	c.reconfigureMu.Lock()
	defer c.reconfigureMu.Unlock()
	if c.closed {
		return errors.New("reconfigure: the Cluster is closed")
	}
	old := c.pools.Load()
	fixedErr := checkFixed(old.cfg, cfg)
	refs, soldOut, warnings, err := c.check(ctx, cfg)
	for _, w := range warnings {
		c.log.Warn(w)
	}
	if fixedErr != nil || err != nil {
		return errors.Join(fixedErr, err)
	}

	added, err := c.buildPools(ctx, old, cfg, refs)
	if err != nil {
		return err
	}
	next, changed, removed, err := c.nextPools(old, cfg, refs, added)
	c.markSoldOut(soldOut)
	c.storePools(next)
	// The servers created for a later offering that was the first until
	// now go to its removed group, as a restart would put them.
	_, offered := c.adoptRemovedOfferings(cfg, next, refs)
	for _, w := range offered {
		c.log.Warn(w)
	}
	warnings = append(warnings, offered...)
	c.applied(old, cfg, warnings, changed, removed)
	return err
}

// buildPools builds the pools new to cfg and checks the settings of the
// others, before anything changes: pool.New makes no API call and starts
// nothing, so a throwaway one checks the settings of a pool that exists.
// On an error it closes the pools it built. The caller holds
// reconfigureMu.
func (c *Cluster) buildPools(ctx context.Context, old *poolSet, cfg *config.Config, refs *references) ([]*pool.Pool, error) {
	var errs []error
	var added []*pool.Pool
	for _, pc := range cfg.NodeGroups() {
		if old.byName[pc.Name] != nil {
			if _, err := pool.New(pc, c.poolDeps(&pc, refs), pool.WithClusterName(cfg.ClusterName)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		p, err := c.newPool(cfg, pc, refs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		added = append(added, p)
	}
	if len(errs) > 0 {
		for _, p := range added {
			_ = p.Close(ctx)
		}
		return nil, errors.Join(errs...)
	}
	return added, nil
}

// nextPools returns the pool set of cfg: the pools added (in cfg's order),
// those in both reconfigured, and those missing from cfg removed and kept
// until they are empty. It returns the names of the pools changed and
// removed. The caller holds reconfigureMu.
func (c *Cluster) nextPools(old *poolSet, cfg *config.Config, refs *references, added []*pool.Pool) (next *poolSet, changed, removed []string, err error) {
	var errs []error
	next = &poolSet{cfg: cfg, byName: map[string]*pool.Pool{}}
	for _, pc := range cfg.NodeGroups() {
		p := old.byName[pc.Name]
		if p == nil {
			p = added[0]
			added = added[1:]
		} else {
			// Also an unchanged pool takes the references as resolved now.
			if p.Removed() || !poolEqual(p.Config(), pc) {
				changed = append(changed, pc.Name)
			}
			if err := p.Reconfigure(pc, c.poolDeps(&pc, refs)); err != nil {
				// Checked by buildPools: only a closed pool refuses now.
				errs = append(errs, err)
			}
		}
		next.list = append(next.list, p)
		next.byName[pc.Name] = p
	}
	for _, p := range old.list {
		if next.byName[p.Name()] != nil {
			continue
		}
		if !p.Removed() {
			p.Remove()
			removed = append(removed, p.Name())
		}
		next.list = append(next.list, p)
		next.byName[p.Name()] = p
	}
	return next, changed, removed, errors.Join(errs...)
}

// applied logs the configuration's own warnings (entries ignored, a pool
// parked at max size 0, ...), which say why a change may not be what was
// meant (those of the checks, warnings, were logged already), keeps both
// for Warnings, and logs what changed.
func (c *Cluster) applied(old *poolSet, cfg *config.Config, warnings, changed, removed []string) {
	var names []string
	for _, pc := range cfg.NodeGroups() {
		if old.byName[pc.Name] == nil {
			names = append(names, pc.Name)
		}
	}
	for _, w := range cfg.Warnings {
		c.log.Warn(w)
	}
	c.warnMu.Lock()
	c.warnings = append(slices.Clone(cfg.Warnings), warnings...)
	c.warnMu.Unlock()
	c.log.Info("configuration applied", zap.Strings("added", names), zap.Strings("changed", changed), zap.Strings("removed", removed),
		zap.Int("warnings", len(cfg.Warnings)+len(warnings)))
	c.changedMu.Lock()
	if c.configChanged != nil {
		close(c.configChanged)
		c.configChanged = nil
	}
	c.changedMu.Unlock()
}

// ConfigChanged returns a channel that is closed when a configuration is
// next applied (by Reconfigure or a reload): what acts on the
// configuration, such as the node lifecycle, can act at once rather than
// at its next interval. Ask again after each close.
func (c *Cluster) ConfigChanged() <-chan struct{} {
	c.changedMu.Lock()
	defer c.changedMu.Unlock()
	if c.configChanged == nil {
		c.configChanged = make(chan struct{})
	}
	return c.configChanged
}

// checkFixed reports the settings that differ between the running
// configuration and cfg although the Cluster cannot change them.
func checkFixed(running, cfg *config.Config) error {
	var errs []error
	fixed := func(path string, same bool) {
		if !same {
			errs = append(errs, fieldErr(path, "differs from the running configuration; it takes a restart to change"))
		}
	}
	fixed("token", running.Token == cfg.Token)
	fixed("endpoint", running.Endpoint == cfg.Endpoint && running.EndpointInsecure == cfg.EndpointInsecure)
	fixed("clusterName", running.ClusterName == cfg.ClusterName)
	fixed("creationTimeout", running.CreationTimeout == cfg.CreationTimeout)
	return errors.Join(errs...)
}

// poolEqual reports whether two pool configurations are the same, so that
// a reload that leaves a pool alone does not count as a change of it.
func poolEqual(a, b config.Pool) bool {
	a.Origin, b.Origin = "", ""
	a.OfferingOrigins, b.OfferingOrigins = nil, nil
	return reflect.DeepEqual(a, b)
}

// dropEmptyRemoved drops the removed pools that have no instance left and
// closes them. The first group of a removed pool of several offerings
// stays while a group of another of its offerings does: a server is found
// through its pool's first group ([poolSet.forServer]), so without it the
// other groups' servers would be in no node group.
func (c *Cluster) dropEmptyRemoved(ctx context.Context) {
	set := c.pools.Load()
	if !slices.ContainsFunc(set.list, (*pool.Pool).Removed) {
		return
	}
	c.reconfigureMu.Lock()
	set = c.pools.Load()
	next := &poolSet{cfg: set.cfg, byName: map[string]*pool.Pool{}}
	// A removed pool refuses claims and, empty, has no server to resume:
	// once empty it stays empty. It stays until its empty spread groups
	// are deleted, which nothing would do after.
	drop := func(p *pool.Pool) bool { return p.Removed() && p.Empty() && len(p.SpreadGroups()) == 0 }
	kept := map[string]bool{} // families with a group of a later offering kept
	for _, p := range set.list {
		pc := p.Config()
		if family := pc.FamilyName(); p.Name() != family && !drop(p) {
			kept[family] = true
		}
	}
	var gone []*pool.Pool
	for _, p := range set.list {
		if drop(p) && !kept[p.Name()] {
			gone = append(gone, p)
			continue
		}
		next.list = append(next.list, p)
		next.byName[p.Name()] = p
	}
	if len(gone) > 0 {
		c.storePools(next)
	}
	c.reconfigureMu.Unlock()
	for _, p := range gone {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := p.Close(cctx); err != nil {
			c.log.Warn("closing a removed pool", zap.String("pool", p.Name()), zap.Error(err))
		}
		cancel()
		c.log.Info("removed pool is empty and gone", zap.String("pool", p.Name()))
	}
}
