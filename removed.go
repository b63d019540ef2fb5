package hcloudscale

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// adoptRemoved makes the servers of this cluster whose pool the
// configuration does not declare (a pool removed from it while another
// process ran, or before a restart) pools removed from the configuration,
// as [Cluster.Reconfigure] keeps a removed pool: min and max size 0, no
// scale-up, so the autoscaler deletes their nodes as they become unneeded,
// and [Cluster.Refresh] drops each once it is empty. As when a reload
// removes a pool of several offerings, the servers created for a later
// offering go to that offering's removed group (see
// [Cluster.adoptRemovedOfferings]). It returns a warning per pool. Without a cluster name the listing's scope is every
// autoscaled server of the project, which may be another cluster's: such
// servers are named in a warning and left alone.
func (c *Cluster) adoptRemoved(cfg *config.Config, set *poolSet) (*poolSet, []string) {
	snap := c.servers.Current()
	if snap == nil {
		return set, nil
	}
	byPool := map[string][]*servercache.Server{}
	for _, s := range snap.All() {
		if s.Pool != "" && set.byName[s.Pool] == nil {
			byPool[s.Pool] = append(byPool[s.Pool], s)
		}
	}
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(byPool)) {
		servers := byPool[name]
		what := fmt.Sprintf("pool %q is not in the configuration but has %d server(s) (%s)", name, len(servers), serverNames(servers))
		if cfg.ClusterName == "" {
			warnings = append(warnings, what+": left alone, since without clusterName they may belong to another cluster; "+
				"set clusterName to have such servers scaled down, or delete them with `hcloudscale cleanup --all-pools`")
			continue
		}
		p, err := c.removedPool(cfg, name, firstOffering(servers))
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: cannot keep it as a removed pool: %v", what, err))
			continue
		}
		set = set.with(p)
		c.storePools(set)
		// The servers created for a later offering go to its removed
		// group, as when a reload removes the pool.
		pc := p.Config()
		for _, o := range laterOfferings(&pc, servers) {
			g, err := c.newPool(cfg, removedOffering(&pc, o), &references{})
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: cannot keep its offering %s as a removed node group: %v", what, o, err))
				continue
			}
			g.Remove()
			set = set.with(g)
			c.storePools(set)
		}
		warnings = append(warnings, what+": kept as a removed pool (min and max size 0, no scale-up); "+
			"the autoscaler deletes its nodes as they become unneeded; add the pool back to keep them")
	}
	return set, warnings
}

// adoptRemovedOfferings keeps the servers of an offering a configured
// pool no longer lists in a removed node group of that offering, as
// [Cluster.Reconfigure] keeps them when it takes the offering out: named
// "<pool>@<serverType>-<location>", no scale-up, scale-down and deletes
// allowed, counted against the pool's max, dropped by [Cluster.Refresh]
// once empty. Only servers created for a later offering that still run
// on it (config.LabelOffering, see [pool.CreatedFor]) are such servers;
// any other server on no offering stays with the pool's first group. An
// offering that has a node group in set already keeps it. New runs it for
// the servers a restart finds, Reconfigure for those of an offering that
// was the first when the reload takes it out, so that both agree. It
// returns a warning per group.
func (c *Cluster) adoptRemovedOfferings(cfg *config.Config, set *poolSet, refs *references) (*poolSet, []string) {
	snap := c.servers.Current()
	if snap == nil {
		return set, nil
	}
	var warnings []string
	for i := range cfg.Pools {
		pc := &cfg.Pools[i]
		for _, o := range laterOfferings(pc, snap.Pool(pc.Name)) {
			g := removedOffering(pc, o)
			if set.byName[g.Name] != nil {
				continue
			}
			p, err := c.newPool(cfg, g, refs)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("pool %q: cannot keep the servers created for its offering %s in a removed node group, they stay in its first group: %v", pc.Name, o, err))
				continue
			}
			p.Remove()
			set = set.with(p)
			c.storePools(set)
			servers := p.Instances()
			warnings = append(warnings, fmt.Sprintf("pool %q does not list the offering %s but has %d server(s) created for it (%s): kept as its removed node group %q (no scale-up, counted against the pool's max); "+
				"the autoscaler deletes its nodes as they become unneeded; list the offering again to keep them", pc.Name, o, len(servers), instanceNames(servers), p.Name()))
		}
	}
	return set, warnings
}

// laterOfferings returns, sorted, the offerings that pc does not list and
// that servers of it were created for as later offerings and still run on
// (see [pool.CreatedFor]).
func laterOfferings(pc *config.Pool, servers []*servercache.Server) []config.Offering {
	var out []config.Offering
	for _, s := range servers {
		o := config.Offering{ServerType: s.ServerType, Location: s.Location}
		if pool.CreatedFor(s, o.ServerType, o.Location) && !slices.Contains(pc.PoolOfferings(), o) && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b config.Offering) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// firstOffering returns the server whose type and location a pool found
// only in servers takes as its own: one not created for a later offering
// when there is one, so that those go to their offerings' groups.
func firstOffering(servers []*servercache.Server) *servercache.Server {
	for _, s := range servers {
		if _, later := s.Labels[config.LabelOffering]; !later {
			return s
		}
	}
	return servers[0]
}

// removedOffering returns the configuration of the node group of offering
// o that pool pc no longer lists: pc's first group on o, o listed last so
// that the group's ID is "<pool>@<o>".
func removedOffering(pc *config.Pool, o config.Offering) config.Pool {
	g := pc.OfferingGroups()[0]
	g.Offerings = append(slices.Clone(pc.PoolOfferings()), o)
	g.OfferingOrigins = nil
	g.Name = config.GroupID(pc.Name, g.Offerings, len(g.Offerings)-1)
	g.ServerType, g.Location = o.ServerType, o.Location
	// A pool of several offerings has no spread groups (config refuses
	// them), nor had this group when the offering was listed.
	g.SpreadGroups = false
	return g
}

// removedPool builds the removed pool name from one of its servers.
func (c *Cluster) removedPool(cfg *config.Config, name string, s *servercache.Server) (*pool.Pool, error) {
	if err := config.CheckPoolName(name); err != nil {
		return nil, err
	}
	pc := config.Pool{
		Name:       name,
		ServerType: s.ServerType,
		Location:   s.Location,
		ServerLabels: map[string]string{
			config.LabelNodeGroup: name,
			config.LabelCluster:   cfg.ClusterName,
		},
	}
	p, err := c.newPool(cfg, pc, &references{})
	if err != nil {
		return nil, err
	}
	p.Remove()
	return p, nil
}

// RemovedPools returns the pools that are no longer configured but still
// have servers ([pool.Pool.Removed]): removed by [Cluster.Reconfigure], or
// found at [New]. Their servers are [pool.Pool.Instances].
func (c *Cluster) RemovedPools() []*pool.Pool {
	var out []*pool.Pool
	for _, p := range c.pools.Load().list {
		if p.Removed() {
			out = append(out, p)
		}
	}
	return out
}

func serverNames(servers []*servercache.Server) string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	return someNames(names)
}

func instanceNames(ins []pool.Instance) string {
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = in.Name
	}
	return someNames(names)
}

// someNames joins the first five names and counts the others.
func someNames(names []string) string {
	const show = 5
	if len(names) > show {
		names = append(names[:show:show], fmt.Sprintf("and %d more", len(names)-show))
	}
	return strings.Join(names, ", ")
}
