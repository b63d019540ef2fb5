package config

import (
	"net/netip"
	"strings"
	"time"

	"github.com/hcloudscale/hcloudscale/cloudinit"
)

// Defaults returns a Config with every default filled in and no token,
// source or pools: a starting point for configurations built in code.
func Defaults() Config {
	return Config{
		Endpoint:        DefaultEndpoint,
		PublicIPv4:      DefaultPublicIPv4,
		PublicIPv6:      DefaultPublicIPv6,
		CreationTimeout: DefaultCreationTimeout,
		DefaultImage:    DefaultImage,
		Replace:         ClusterReplace{MaxInFlight: DefaultClusterReplaceMaxInFlight, RepairMaxUnhealthy: DefaultRepairMaxUnhealthy},
	}
}

// Pool returns the pool with the given name, or nil.
func (c *Config) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// Validate checks a resolved Config, such as one built in code, with the
// rules Load applies to its inputs. Errors name the Go field as a path in
// lower camel case ("pools[1].taints[0].effect") and are all returned,
// joined. An empty Endpoint means DefaultEndpoint; everything else must be
// set as Load would set it: CreationTimeout positive, every pool with both
// image specs and its LabelNodeGroup (and LabelCluster) server labels, a
// pool's Replace with its defaults filled in. A zero Replace.MaxInFlight
// (of the cluster) means DefaultClusterReplaceMaxInFlight.
func (c *Config) Validate() error {
	var p problems
	if c.Token == "" {
		p.addf("token", "required")
	} else if err := checkNoSpace(c.Token.Reveal()); err != nil {
		p.addf("token", "token %w", err)
	}
	if c.Endpoint != "" {
		_, err := parseEndpoint(c.Endpoint, c.EndpointInsecure)
		p.add("endpoint", err)
	}
	if c.ClusterName != "" {
		p.add("clusterName", CheckClusterName(c.ClusterName))
	}
	if c.Network != "" {
		p.add("network", checkReference(c.Network))
	}
	p.references("firewalls", c.Firewalls)
	p.references("sshKeys", c.SSHKeys)
	if c.CreationTimeout <= 0 {
		p.addf("creationTimeout", "%v is not positive", c.CreationTimeout)
	}
	if c.DefaultImage != "" {
		p.add("defaultImage", CheckImageSpec(c.DefaultImage))
	}
	p.imageSpecs("images", c.Images, false)
	if c.DefaultSubnetIPRange.IsValid() {
		p.add("defaultSubnetIPRange", checkSubnet(c.DefaultSubnetIPRange))
	}
	p.validateClusterReplace("replace", &c.Replace)
	if len(c.Pools) == 0 {
		p.addf("pools", "no pools")
	}
	first := map[string]int{}
	for i := range c.Pools {
		path := indexPath("pools", i)
		pool := &c.Pools[i]
		if j, dup := first[pool.Name]; dup && pool.Name != "" {
			p.addf(path+".name", "%q is already used by pools[%d]", pool.Name, j)
		} else {
			first[pool.Name] = i
		}
		p.validatePool(path, c, pool)
	}
	p.placementGroups(c.Pools, func(i int) string { return indexPath("pools", i) + ".placementGroup" })
	return p.err()
}

func (p *problems) validatePool(path string, c *Config, pool *Pool) {
	p.add(path+".name", CheckPoolName(pool.Name))
	for _, err := range checkSizes(pool.MinSize, true, pool.MaxSize, true) {
		p.add(path, err)
	}
	for _, f := range []struct{ field, v string }{{"serverType", pool.ServerType}, {"location", pool.Location}} {
		field, v := f.field, f.v
		switch {
		case v == "":
			p.addf(path+"."+field, "required")
		case strings.ToLower(v) != v:
			p.addf(path+"."+field, "%q is not lower-case", v)
		default:
			p.add(path+"."+field, checkNoSpace(v))
		}
	}
	if pool.CloudInitTemplate {
		_, err := cloudinit.Parse(pool.CloudInit.Reveal())
		if err != nil {
			p.add(path+".cloudInit", templateError(err))
		} else {
			p.add(path+".cloudInit", CheckRendering(pool, c.ClusterName))
		}
	} else {
		p.add(path+".cloudInit", checkCloudInit(pool.CloudInit.Reveal()))
	}
	p.imageSpecs(path+".images", pool.Images, true)
	p.checkKubeLabels(path+".labels", pool.Labels)
	p.checkTaints(path+".taints", pool.Taints)
	for _, k := range sortedKeys(pool.ServerLabels) {
		if k == LabelNodeGroup || k == LabelCluster {
			continue
		}
		p.add(childPath(path+".serverLabels", k), CheckServerLabel(k, pool.ServerLabels[k]))
	}
	if got := pool.ServerLabels[LabelNodeGroup]; got != pool.Name {
		p.addf(childPath(path+".serverLabels", LabelNodeGroup), "%q, want the pool name %q", got, pool.Name)
	}
	if got, ok := pool.ServerLabels[LabelCluster]; got != c.ClusterName || (ok && c.ClusterName == "") {
		p.addf(childPath(path+".serverLabels", LabelCluster), "%q, want the cluster name %q", got, c.ClusterName)
	}
	p.validatePlacement(path, pool)
	p.validateOfferings(path+".offerings", pool)
	if pool.MaxPods != 0 && (pool.MaxPods < MinMaxPods || pool.MaxPods > MaxMaxPods) {
		p.addf(path+".maxPods", "%d is out of range %d..%d", pool.MaxPods, MinMaxPods, MaxMaxPods)
	}
	for _, r := range []struct {
		name string
		sign int
	}{{"cpu", pool.Reserved.CPU.Sign()}, {"memory", pool.Reserved.Memory.Sign()}, {"ephemeralStorage", pool.Reserved.EphemeralStorage.Sign()}} {
		if r.sign < 0 {
			p.addf(path+".reserved."+r.name, "negative")
		}
	}
	if a := pool.Autoscaling; a != nil {
		p.validateAutoscaling(path+".autoscaling", a)
	}
	if r := pool.Replace; r != nil {
		p.validateReplace(path+".replace", r)
	}
}

// validatePlacement checks where the pool's servers go: network, subnet,
// firewalls, SSH keys, placement groups and public IPs.
func (p *problems) validatePlacement(path string, pool *Pool) {
	if pool.SubnetIPRange.IsValid() {
		sub := pool.SubnetIPRange
		switch {
		case checkSubnet(sub) != nil:
			p.add(path+".subnetIPRange", checkSubnet(sub))
		case pool.Network == "":
			p.addf(path+".subnetIPRange", "set without a network")
		}
	}
	if pool.Network != "" {
		p.add(path+".network", checkReference(pool.Network))
	}
	p.references(path+".firewalls", pool.Firewalls)
	p.references(path+".sshKeys", pool.SSHKeys)
	if pool.PlacementGroup != "" {
		p.add(path+".placementGroup", checkReference(pool.PlacementGroup))
	}
	if pool.SpreadGroups && pool.PlacementGroup != "" {
		p.addf(path+".spreadGroups", "set together with placementGroup %q", pool.PlacementGroup)
	}
	switch {
	case pool.PublicIPv4 || pool.PublicIPv6:
	case pool.Network == "":
		p.addf(path, "pool %q has no public IPv4, no public IPv6 and no network: its servers would be unreachable", pool.Name)
	case pool.SubnetIPRange.IsValid():
		p.addf(path+".subnetIPRange", "pool %q has no public IP: a server without one joins its network when it is created, where no subnet can be chosen", pool.Name)
	}
}

func (p *problems) validateAutoscaling(path string, a *Autoscaling) {
	for _, t := range []struct {
		name string
		f    *float64
	}{
		{"scaleDownUtilizationThreshold", a.ScaleDownUtilizationThreshold},
		{"scaleDownGpuUtilizationThreshold", a.ScaleDownGPUUtilizationThreshold},
	} {
		if t.f != nil && !(*t.f >= 0 && *t.f <= 1) {
			p.addf(path+"."+t.name, "%v is out of range 0..1", *t.f)
		}
	}
	for _, t := range []struct {
		name string
		d    *time.Duration
	}{
		{"scaleDownUnneededTime", a.ScaleDownUnneededTime},
		{"scaleDownUnreadyTime", a.ScaleDownUnreadyTime},
		{"maxNodeProvisionTime", a.MaxNodeProvisionTime},
		{"maxNodeStartupTime", a.MaxNodeStartupTime},
	} {
		if t.d != nil && *t.d <= 0 {
			p.addf(path+"."+t.name, "%v is not positive", *t.d)
		}
	}
}

// imageSpecs checks both specs; required says an empty one is an error.
func (p *problems) imageSpecs(path string, im ImagesForArch, required bool) {
	for _, arch := range []Arch{ArchAMD64, ArchARM64} {
		spec := im.ForArch(arch)
		switch {
		case spec != "":
			p.add(path+"."+string(arch), CheckImageSpec(spec))
		case required:
			p.addf(path+"."+string(arch), "required")
		}
	}
}

func (p *problems) references(path string, refs []string) {
	seen := map[string]bool{}
	for i, r := range refs {
		if seen[r] {
			p.addf(indexPath(path, i), "%q is listed twice", r)
			continue
		}
		seen[r] = true
		p.add(indexPath(path, i), checkReference(r))
	}
}

func checkSubnet(pfx netip.Prefix) error {
	_, err := ParseSubnet(pfx.String())
	return err
}
