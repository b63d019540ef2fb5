package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hcloudscale/hcloudscale/cloudinit"
)

// pools builds the resolved view of every --nodes pool and checks what
// involves more than one setting: nodeConfigs coverage, subnets against
// HCLOUD_NETWORK and the default range, and placement-group sizes.
func (p *problems) pools(cfg *Config, cc *ClusterConfig, legacyCloudInit Secret, specs []NodeSpec) []Pool {
	pools := make([]Pool, 0, len(specs))
	jsonMode := cfg.Source == SourceClusterConfig || cfg.Source == SourceClusterConfigFile
	if cc != nil {
		if cc.DefaultSubnetIPRange.IsValid() && cfg.Network == "" {
			p.addf("defaultSubnetIPRange", "set, but %s is not: the range would be ignored", EnvNetwork)
		}
	}
	for _, spec := range specs {
		pool := Pool{
			Name:       spec.Name,
			MinSize:    spec.MinSize,
			MaxSize:    spec.MaxSize,
			ServerType: spec.ServerType,
			Location:   spec.Location,
			Network:    cfg.Network,
			Firewalls:  slices.Clone(cfg.Firewalls),
			SSHKeys:    slices.Clone(cfg.SSHKeys),
			PublicIPv4: cfg.PublicIPv4,
			PublicIPv6: cfg.PublicIPv6,
			Images:     imagesFor(nil, cfg.Images, cfg.DefaultImage),
		}
		var nc *NodeConfig
		switch {
		case !jsonMode:
			pool.CloudInit = legacyCloudInit
		case cc == nil:
			// The document did not parse; its errors are reported already.
		default:
			nc = cc.NodeConfigs[spec.Name]
			if nc == nil {
				p.addf(childPath("nodeConfigs", spec.Name), "missing: the cluster config needs an entry for every --nodes pool")
			}
		}
		if nc != nil {
			path := childPath("nodeConfigs", spec.Name)
			pool.CloudInit = nc.CloudInit
			pool.CloudInitTemplate = cc.isTemplate(nc)
			pool.Images = imagesFor(nc.ImagesForArch, cfg.Images, cfg.DefaultImage)
			pool.Labels = maps.Clone(nc.Labels)
			pool.Taints = slices.Clone(nc.Taints)
			pool.Firewalls = appendUnique(pool.Firewalls, nc.Firewalls...)
			pool.PlacementGroup = nc.PlacementGroup
			pool.MaxPods = nc.MaxPods
			pool.Reserved = nc.Reserved
			pool.Autoscaling = nc.Autoscaling
			pool.ServerLabels = maps.Clone(nc.ServerLabels)
			if cfg.Network != "" {
				pool.SubnetIPRange = cc.DefaultSubnetIPRange
			}
			if sub := nc.SubnetIPRange; sub.IsValid() {
				def := cc.DefaultSubnetIPRange
				switch {
				case cfg.Network == "":
					p.addf(path+".subnetIPRange", "set, but %s is not: the range would be ignored", EnvNetwork)
				default:
					if def.IsValid() && sub != def && sub.Overlaps(def) {
						p.warnf(path+".subnetIPRange", "%s overlaps defaultSubnetIPRange %s: subnets of one network cannot overlap, so at most one of them can be a subnet of %s (hcloudscale.New checks which)", sub, def, EnvNetwork)
					}
					pool.SubnetIPRange = sub
				}
			}
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

// unusedNodeConfigs warns about entries no --nodes pool uses: upstream
// ignored them silently, and they are often a misspelt pool name.
func (p *problems) unusedNodeConfigs(cc *ClusterConfig, specs []NodeSpec) {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	for _, name := range sortedKeys(cc.NodeConfigs) {
		if slices.Contains(names, name) {
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
