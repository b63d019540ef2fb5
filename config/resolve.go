package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hcloudscale/hcloudscale/cloudinit"
)

// pools builds the resolved view of every pool, the --nodes ones and then
// those the cluster config declares on its own, and checks what involves
// more than one setting: nodeConfigs coverage, a pool given by both
// sources, subnets against HCLOUD_NETWORK and the default range, and
// placement-group sizes. origins[i] names the --nodes value of specs[i].
func (p *problems) pools(cfg *Config, cc *ClusterConfig, legacyCloudInit Secret, specs []NodeSpec, origins []string) []Pool {
	jsonMode := cfg.Source == SourceClusterConfig || cfg.Source == SourceClusterConfigFile
	if cc != nil {
		if cc.DefaultSubnetIPRange.IsValid() && cfg.Network == "" {
			p.addf("defaultSubnetIPRange", "set, but %s is not: the range would be ignored", EnvNetwork)
		}
	}
	specs, origins = slices.Clone(specs), slices.Clone(origins)
	if jsonMode && cc != nil {
		for i, spec := range specs {
			if nc := cc.NodeConfigs[spec.Name]; nc != nil {
				p.agree(childPath("nodeConfigs", spec.Name), nc, spec, origins[i])
			}
		}
		more, moreOrigins := p.declaredPools(cc, specs)
		specs, origins = append(specs, more...), append(origins, moreOrigins...)
	}
	pools := make([]Pool, 0, len(specs))
	for i, spec := range specs {
		pool := basePool(cfg, spec, origins[i])
		var nc *NodeConfig
		switch {
		case !jsonMode:
			pool.CloudInit = legacyCloudInit
		case cc == nil:
			// The document did not parse; its errors are reported already.
		default:
			nc = p.nodeConfigOf(cc, spec.Name)
		}
		if nc != nil {
			p.applyNodeConfig(&pool, cfg, cc, nc)
		}
		pool.ServerLabels = serverLabels(pool.ServerLabels, pool.Name, cfg.ClusterName)
		if nc != nil && pool.CloudInitTemplate {
			// The template parsed (or its error is reported already);
			// what is left is what depends on the --nodes pool.
			if _, err := cloudinit.Parse(pool.CloudInit.Reveal()); err == nil {
				p.add(childPath("nodeConfigs", spec.Name)+".cloudInit", CheckRendering(&pool, cfg.ClusterName))
			}
		}
		pools = append(pools, pool)
	}
	if cc != nil {
		p.unusedNodeConfigs(cc, specs)
	}
	p.placementGroups(pools, func(i int) string { return childPath("nodeConfigs", pools[i].Name) + ".placementGroup" })
	return pools
}

// basePool is the pool of spec with the settings of the environment,
// before its nodeConfigs entry.
func basePool(cfg *Config, spec NodeSpec, origin string) Pool {
	return Pool{
		Name:       spec.Name,
		MinSize:    spec.MinSize,
		MaxSize:    spec.MaxSize,
		ServerType: spec.ServerType,
		Location:   spec.Location,
		Origin:     origin,
		Network:    cfg.Network,
		Firewalls:  slices.Clone(cfg.Firewalls),
		SSHKeys:    slices.Clone(cfg.SSHKeys),
		PublicIPv4: cfg.PublicIPv4,
		PublicIPv6: cfg.PublicIPv6,
		Images:     imagesFor(nil, cfg.Images, cfg.DefaultImage),
	}
}

// reachable reports every pool whose servers would have no public IP and
// no network, naming the setting that turned the addresses off: the
// pool's publicIPv4/publicIPv6, or HCLOUD_PUBLIC_IPV4/6 for the pools
// that inherit them. A server without public IPs joins its network in the
// create request, which cannot choose a subnet, so such a pool cannot have
// a subnetIPRange either.
func (p *problems) reachable(cfg *Config, cc *ClusterConfig) {
	var inherited []string
	for _, pool := range cfg.Pools {
		if pool.PublicIPv4 || pool.PublicIPv6 {
			continue
		}
		path := childPath("nodeConfigs", pool.Name)
		var nc *NodeConfig
		if cc != nil {
			nc = cc.NodeConfigs[pool.Name]
		}
		own := nc != nil && (nc.PublicIPv4 != nil || nc.PublicIPv6 != nil)
		switch {
		case pool.Network == "" && own:
			p.addf(path, "pool %q has no public IPv4 and no public IPv6 (publicIPv4, publicIPv6, %s, %s) and %s is unset: its servers would have no network at all", pool.Name, EnvPublicIPv4, EnvPublicIPv6, EnvNetwork)
		case pool.Network == "":
			inherited = append(inherited, strconv.Quote(pool.Name))
		case pool.SubnetIPRange.IsValid():
			key := "subnetIPRange"
			if nc == nil || !nc.SubnetIPRange.IsValid() {
				path, key = "defaultSubnetIPRange", "defaultSubnetIPRange"
			}
			if key == "subnetIPRange" {
				path += ".subnetIPRange"
			}
			p.addf(path, "pool %q has no public IP: a server without one joins %s when it is created, where no subnet can be chosen; remove %s or give the pool publicIPv4 or publicIPv6", pool.Name, EnvNetwork, key)
		}
	}
	if len(inherited) > 0 {
		p.addf(EnvPublicIPv4+", "+EnvPublicIPv6, "both false and %s is unset: servers would have no network at all (pool %s); set %s, or publicIPv4 or publicIPv6 in the pool's nodeConfigs entry", EnvNetwork, strings.Join(inherited, ", "), EnvNetwork)
	}
}

// nodeConfigOf returns the nodeConfigs entry of pool name, reporting a
// missing one (with a hint when an entry differs only in case).
func (p *problems) nodeConfigOf(cc *ClusterConfig, name string) *NodeConfig {
	nc := cc.NodeConfigs[name]
	if nc == nil && !p.has(childPath("nodeConfigs", name)) { // a null entry is reported already
		hint := ""
		for _, other := range sortedKeys(cc.NodeConfigs) {
			if strings.EqualFold(other, name) {
				hint = fmt.Sprintf("; the entry %q differs only in case: pool names are lower-case, and the entry's key must be the pool's name exactly", other)
			}
		}
		p.addf(childPath("nodeConfigs", name), "missing: the cluster config needs an entry for every --nodes pool%s", hint)
	}
	return nc
}

// applyNodeConfig gives pool the settings of its nodeConfigs entry nc,
// checking its subnet range against HCLOUD_NETWORK and the default range.
func (p *problems) applyNodeConfig(pool *Pool, cfg *Config, cc *ClusterConfig, nc *NodeConfig) {
	path := childPath("nodeConfigs", pool.Name)
	pool.CloudInit = nc.CloudInit
	pool.CloudInitTemplate = cc.isTemplate(nc)
	pool.Images = imagesFor(nc.ImagesForArch, cfg.Images, cfg.DefaultImage)
	pool.Labels = maps.Clone(nc.Labels)
	pool.Taints = slices.Clone(nc.Taints)
	pool.Firewalls = appendUnique(pool.Firewalls, nc.Firewalls...)
	pool.PlacementGroup = nc.PlacementGroup
	pool.SpreadGroups = nc.SpreadGroups
	pool.Offerings, pool.OfferingOrigins = p.poolOfferings(path+".offerings", Offering{ServerType: pool.ServerType, Location: pool.Location}, nc.Offerings)
	if pool.SpreadGroups && len(pool.Offerings) > 1 {
		p.addf(path+".offerings", "%d offerings together with spreadGroups, which the node groups of one pool's offerings cannot share yet: use placementGroup or no placement group", len(pool.Offerings))
	}
	if nc.PublicIPv4 != nil {
		pool.PublicIPv4 = *nc.PublicIPv4
	}
	if nc.PublicIPv6 != nil {
		pool.PublicIPv6 = *nc.PublicIPv6
	}
	pool.MaxPods = nc.MaxPods
	pool.Reserved = nc.Reserved
	pool.Autoscaling = nc.Autoscaling
	pool.Replace = nc.Replace.clone()
	if r := pool.Replace; r != nil && len(pool.Offerings) < 2 {
		if i := slices.Index(r.Drift, DriftOffering); i >= 0 {
			p.warnf(indexPath(path+".replace.drift", i), "%q, but the pool %s has one offering: none of its nodes is drift for it (list offerings to use it)", DriftOffering, pool.Name)
		}
	}
	pool.ServerLabels = maps.Clone(nc.ServerLabels)
	if cfg.Network != "" {
		pool.SubnetIPRange = cc.DefaultSubnetIPRange
	}
	sub := nc.SubnetIPRange
	if !sub.IsValid() {
		return
	}
	if cfg.Network == "" {
		p.addf(path+".subnetIPRange", "set, but %s is not: the range would be ignored", EnvNetwork)
		return
	}
	if def := cc.DefaultSubnetIPRange; def.IsValid() && sub != def && sub.Overlaps(def) {
		p.warnf(path+".subnetIPRange", "%s overlaps defaultSubnetIPRange %s: subnets of one network cannot overlap, so at most one of them can be a subnet of %s (hcloudscale.New checks which)", sub, def, EnvNetwork)
	}
	pool.SubnetIPRange = sub
}

// imagesFor applies the image precedence per architecture: the pool's
// imagesForArch, then the global one, then HCLOUD_IMAGE (or DefaultImage).
// Upstream let a pool object replace the global one whole, so a pool that
// named only amd64 got no arm64 image; here only the missing arch falls
// through.
func imagesFor(pool *ImagesForArch, global ImagesForArch, fallback ImageSpec) ImagesForArch {
	pick := func(arch Arch) ImageSpec {
		if pool != nil && pool.ForArch(arch) != "" {
			return pool.ForArch(arch)
		}
		if global.ForArch(arch) != "" {
			return global.ForArch(arch)
		}
		return fallback
	}
	return ImagesForArch{AMD64: pick(ArchAMD64), ARM64: pick(ArchARM64)}
}

// ForArch returns the spec for arch, or "" for an unknown arch.
func (im ImagesForArch) ForArch(arch Arch) ImageSpec {
	switch arch {
	case ArchAMD64:
		return im.AMD64
	case ArchARM64:
		return im.ARM64
	}
	return ""
}

// serverLabels merges the pool's labels with the labels hcloudscale owns.
func serverLabels(user map[string]string, pool, cluster string) map[string]string {
	out := make(map[string]string, len(user)+2)
	maps.Copy(out, user)
	out[LabelNodeGroup] = pool
	if cluster != "" {
		out[LabelCluster] = cluster
	}
	return out
}

func appendUnique(dst []string, more ...string) []string {
	for _, s := range more {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// agree checks that the --nodes fields a nodeConfigs entry gives (at
// path) match the --nodes spec of the same pool (at origin): a pool's
// bounds and offering must have one value, whichever source is edited.
func (p *problems) agree(path string, nc *NodeConfig, spec NodeSpec, origin string) {
	differ := func(field string, got, want any) {
		p.addf(path+"."+field+", "+origin, "%v in the cluster config differs from %v in %s; give the pool's %s in one place or make them agree", got, want, origin, field)
	}
	if nc.MinSize != nil && *nc.MinSize != spec.MinSize {
		differ("minSize", *nc.MinSize, spec.MinSize)
	}
	if nc.MaxSize != nil && *nc.MaxSize != spec.MaxSize {
		differ("maxSize", *nc.MaxSize, spec.MaxSize)
	}
	if nc.ServerType != "" && nc.ServerType != spec.ServerType {
		differ("serverType", strconv.Quote(nc.ServerType), strconv.Quote(spec.ServerType))
	}
	if nc.Location != "" && nc.Location != spec.Location {
		differ("location", strconv.Quote(nc.Location), strconv.Quote(spec.Location))
	}
}

// declaredPools returns the pools that nodeConfigs entries declare without
// a --nodes spec, by name: such an entry needs serverType, location and
// maxSize (minSize defaults to 0), and its key must be a pool name.
func (p *problems) declaredPools(cc *ClusterConfig, specs []NodeSpec) ([]NodeSpec, []string) {
	var out []NodeSpec
	var origins []string
	for _, name := range sortedKeys(cc.NodeConfigs) {
		nc := cc.NodeConfigs[name]
		if !nc.declaresPool() || slices.ContainsFunc(specs, func(s NodeSpec) bool { return s.Name == name }) {
			continue
		}
		path := childPath("nodeConfigs", name)
		before := len(p.errs)
		p.add(path, CheckPoolName(name))
		for _, f := range []struct {
			field string
			unset bool
		}{{"serverType", nc.ServerType == ""}, {"location", nc.Location == ""}, {"maxSize", nc.MaxSize == nil}} {
			if f.unset {
				p.addf(path+"."+f.field, "required: no --nodes spec names the pool, so its entry declares it with serverType, location, maxSize and optionally minSize")
			}
		}
		if len(p.errs) > before {
			continue
		}
		spec := NodeSpec{Name: name, MaxSize: *nc.MaxSize, ServerType: nc.ServerType, Location: nc.Location}
		if nc.MinSize != nil {
			spec.MinSize = *nc.MinSize
		}
		if spec.MaxSize == 0 {
			p.warnf(path+".maxSize", "0: the pool is parked and never scaled up")
		}
		out = append(out, spec)
		origins = append(origins, path)
	}
	return out, origins
}

// unusedNodeConfigs warns about entries that neither a --nodes pool uses
// nor declare a pool: upstream ignored them silently, and they are often a
// misspelt pool name.
func (p *problems) unusedNodeConfigs(cc *ClusterConfig, specs []NodeSpec) {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	for _, name := range sortedKeys(cc.NodeConfigs) {
		if slices.Contains(names, name) || cc.NodeConfigs[name].declaresPool() {
			continue
		}
		hint := ""
		if s := suggest(name, names); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		p.warnf(childPath("nodeConfigs", name), "no --nodes pool has this name, entry ignored%s", hint)
	}
}

// placementGroups checks that the pools sharing a placement group cannot
// grow beyond what a spread group holds. Groups are compared by the string
// given; an ID and a name of the same group are not recognised as one here.
// pathOf names the setting of pools[i] in errors.
func (p *problems) placementGroups(pools []Pool, pathOf func(i int) string) {
	type member struct {
		Pool
		path string
	}
	byGroup := map[string][]member{}
	for i, pool := range pools {
		if pool.PlacementGroup != "" {
			byGroup[pool.PlacementGroup] = append(byGroup[pool.PlacementGroup], member{pool, pathOf(i)})
		}
	}
	for _, group := range sortedKeys(byGroup) {
		members := byGroup[group]
		sum := 0
		var paths, parts []string
		for _, m := range members {
			sum += m.MaxSize
			paths = append(paths, m.path)
			parts = append(parts, fmt.Sprintf("%s max %d", m.Name, m.MaxSize))
		}
		if sum > MaxPlacementGroupServers {
			sort.Strings(paths)
			p.addf(strings.Join(paths, ", "), "placement group %q would hold up to %d servers (%s), a spread placement group holds at most %d",
				group, sum, strings.Join(parts, ", "), MaxPlacementGroupServers)
		}
	}
}

// UpstreamDefaultImage is what the upstream provider booted in the legacy
// format when HCLOUD_IMAGE was unset.
const UpstreamDefaultImage ImageSpec = "ubuntu-20.04"

// upstreamImages warns about every pool whose servers boot another image
// than the upstream provider would have booted with the same input:
//
//   - in the JSON format upstream never read HCLOUD_IMAGE; an architecture
//     without an imagesForArch entry got an empty image name, which booted
//     the newest snapshot of the architecture in the project;
//   - a pool's imagesForArch replaced the global object whole, so an
//     architecture the pool left out was empty too (the newest snapshot),
//     where here it falls back to the global entry: recorded in
//     Pool.InheritedImages for hcloudscale.New, which knows whether the
//     pool's servers have that architecture;
//   - in the legacy format an unset HCLOUD_IMAGE meant ubuntu-20.04.
//
// A cloud-init written for a prepared snapshot that boots stock Ubuntu
// never joins the cluster, so none of this may change silently.
func (p *problems) upstreamImages(cfg *Config, cc *ClusterConfig, imageSet bool) {
	jsonMode := cfg.Source == SourceClusterConfig || cfg.Source == SourceClusterConfigFile
	if !jsonMode {
		if cfg.Source == SourceLegacyCloudInit && !imageSet {
			p.warnf(EnvImage, "unset: servers boot %s; upstream booted %s: set %s to the image you want", DefaultImage, UpstreamDefaultImage, EnvImage)
		}
		return
	}
	if cc == nil {
		return
	}
	type change struct {
		spec  ImageSpec
		from  string
		archs []string
		pools []string
	}
	var global ImagesForArch
	if cc.ImagesForArch != nil {
		global = *cc.ImagesForArch
	}
	var changes []*change
	for i := range cfg.Pools {
		pool := &cfg.Pools[i]
		nc := cc.NodeConfigs[pool.Name]
		if nc == nil {
			continue
		}
		for _, arch := range []Arch{ArchAMD64, ArchARM64} {
			upstream, from := global.ForArch(arch), EnvImage
			if !imageSet {
				from = "the default"
			}
			if nc.ImagesForArch != nil {
				upstream = nc.ImagesForArch.ForArch(arch)
				if upstream == "" && global.ForArch(arch) != "" {
					// Whether it matters depends on the pool's server
					// type, which New looks up.
					pool.InheritedImages = append(pool.InheritedImages, arch)
					continue
				}
			}
			ours := pool.Images.ForArch(arch)
			if upstream != "" || ours == "" {
				continue
			}
			pool.SnapshotImages = append(pool.SnapshotImages, arch)
			i := slices.IndexFunc(changes, func(c *change) bool { return c.spec == ours && c.from == from })
			if i < 0 {
				changes = append(changes, &change{spec: ours, from: from})
				i = len(changes) - 1
			}
			c := changes[i]
			if !slices.Contains(c.archs, string(arch)) {
				c.archs = append(c.archs, string(arch))
			}
			if !slices.Contains(c.pools, pool.Name) {
				c.pools = append(c.pools, pool.Name)
			}
		}
	}
	for _, c := range changes {
		p.warnf("imagesForArch", "no %s entry for pools %s: their servers boot %q from %s, where upstream sent no image name and booted the newest snapshot of the architecture; set imagesForArch to choose",
			strings.Join(c.archs, " or "), strings.Join(c.pools, ", "), c.spec, c.from)
	}
}
