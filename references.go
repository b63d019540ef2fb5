package hcloudscale

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

// maxPlacementGroupServers is Hetzner's limit of servers in one spread
// placement group.
const maxPlacementGroupServers = 10

// referenceAPI is what resolving the configured references needs from the
// API. The hcloud-go clients satisfy it.
type referenceAPI struct {
	networks interface {
		Get(ctx context.Context, idOrName string) (*hcloud.Network, *hcloud.Response, error)
	}
	firewalls interface {
		Get(ctx context.Context, idOrName string) (*hcloud.Firewall, *hcloud.Response, error)
	}
	sshKeys interface {
		Get(ctx context.Context, idOrName string) (*hcloud.SSHKey, *hcloud.Response, error)
	}
	placementGroups interface {
		Get(ctx context.Context, idOrName string) (*hcloud.PlacementGroup, *hcloud.Response, error)
	}
}

func newReferenceAPI(c *hcloud.Client) referenceAPI {
	return referenceAPI{
		networks:        &c.Network,
		firewalls:       &c.Firewall,
		sshKeys:         &c.SSHKey,
		placementGroups: &c.PlacementGroup,
	}
}

// references holds every object the configuration names, looked up once.
// Lists hold each object once, by ID, however often and in whatever form
// (ID or name) the configuration names it.
type references struct {
	network         *hcloud.Network
	firewalls       map[string]*hcloud.Firewall // by the string the config uses
	sshKeys         []*hcloud.SSHKey
	placementGroups map[string]*hcloud.PlacementGroup // by the string the config uses
}

// resolveReferences looks up the network, firewalls, SSH keys and placement
// groups the configuration names. Upstream silently ignores a reference that
// does not exist, so servers come up without their firewall; here every
// missing reference is an error naming the setting, and all of them are
// reported together.
func resolveReferences(ctx context.Context, api referenceAPI, cfg *config.Config) (*references, error) {
	refs := &references{
		firewalls:       map[string]*hcloud.Firewall{},
		placementGroups: map[string]*hcloud.PlacementGroup{},
	}
	var errs []error
	if cfg.Network != "" {
		errs = append(errs, refs.lookupNetwork(ctx, api, cfg.Network)...)
	}
	errs = append(errs, refs.lookupSSHKeys(ctx, api, cfg.SSHKeys)...)
	// The global firewalls come first so that a missing global firewall is
	// reported under its own name, not under the first pool that inherits it.
	for i, fw := range cfg.Firewalls {
		if err := refs.lookupFirewall(ctx, api, fw); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("HCLOUD_FIREWALL[%d]", i), "%w", err))
		}
	}
	global := map[string]bool{}
	for _, fw := range cfg.Firewalls {
		global[fw] = true
	}
	for i := range cfg.Pools {
		errs = append(errs, refs.lookupPool(ctx, api, &cfg.Pools[i], global)...)
	}

	errs = append(errs, checkSubnets(cfg, refs.network)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return refs, nil
}

func (r *references) lookupNetwork(ctx context.Context, api referenceAPI, idOrName string) []error {
	n, _, err := api.networks.Get(ctx, idOrName)
	switch {
	case err != nil:
		return []error{fieldErr("HCLOUD_NETWORK", "looking up network %q: %w", idOrName, err)}
	case n == nil:
		return []error{fieldErr("HCLOUD_NETWORK", "network %q does not exist", idOrName)}
	}
	r.network = n
	return nil
}

func (r *references) lookupSSHKeys(ctx context.Context, api referenceAPI, keys []string) []error {
	var errs []error
	for i, key := range keys {
		k, _, err := api.sshKeys.Get(ctx, key)
		switch {
		case err != nil:
			errs = append(errs, fieldErr(fmt.Sprintf("HCLOUD_SSH_KEY[%d]", i), "looking up SSH key %q: %w", key, err))
		case k == nil:
			errs = append(errs, fieldErr(fmt.Sprintf("HCLOUD_SSH_KEY[%d]", i), "SSH key %q does not exist", key))
		case slices.ContainsFunc(r.sshKeys, func(o *hcloud.SSHKey) bool { return o.ID == k.ID }):
			// The same key by ID and by name: sent once.
		default:
			r.sshKeys = append(r.sshKeys, k)
		}
	}
	return errs
}

// lookupPool looks up the firewalls of p that are not global nor looked
// up for an earlier pool, then its placement group unless an earlier pool
// has it.
func (r *references) lookupPool(ctx context.Context, api referenceAPI, p *config.Pool, global map[string]bool) []error {
	var errs []error
	for i, fw := range p.Firewalls {
		if global[fw] {
			continue
		}
		if _, done := r.firewalls[fw]; done {
			continue
		}
		if err := r.lookupFirewall(ctx, api, fw); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("nodeConfigs.%s.firewalls[%d]", p.Name, i), "%w", err))
		}
	}
	if p.PlacementGroup == "" {
		return errs
	}
	if _, done := r.placementGroups[p.PlacementGroup]; done {
		return errs
	}
	path := fmt.Sprintf("nodeConfigs.%s.placementGroup", p.Name)
	pg, _, err := api.placementGroups.Get(ctx, p.PlacementGroup)
	switch {
	case err != nil:
		errs = append(errs, fieldErr(path, "looking up placement group %q: %w", p.PlacementGroup, err))
	case pg == nil:
		errs = append(errs, fieldErr(path, "placement group %q does not exist", p.PlacementGroup))
	case pg.Type != hcloud.PlacementGroupTypeSpread:
		errs = append(errs, fieldErr(path, "placement group %q has type %q, want %q", p.PlacementGroup, pg.Type, hcloud.PlacementGroupTypeSpread))
	default:
		r.placementGroups[p.PlacementGroup] = pg
	}
	return errs
}

func (r *references) lookupFirewall(ctx context.Context, api referenceAPI, idOrName string) error {
	fw, _, err := api.firewalls.Get(ctx, idOrName)
	switch {
	case err != nil:
		return fmt.Errorf("looking up firewall %q: %w", idOrName, err)
	case fw == nil:
		return fmt.Errorf("firewall %q does not exist", idOrName)
	}
	r.firewalls[idOrName] = fw
	return nil
}

// checkPlacementRoom verifies that the pools sharing a spread placement group
// fit into it: their summed max size plus the members that belong to none of
// them is at most ten. Upstream ignores existing members and fails only at
// scale-up with placement_group_member_limit_reached.
func checkPlacementRoom(cfg *config.Config, refs *references, poolOf func(serverID int64) string) []error {
	type group struct {
		pg    *hcloud.PlacementGroup
		pools []string
		max   int
	}
	groups := map[int64]*group{}
	var order []int64
	for _, p := range cfg.Pools {
		pg := refs.placementGroups[p.PlacementGroup]
		if pg == nil {
			continue
		}
		g := groups[pg.ID]
		if g == nil {
			g = &group{pg: pg}
			groups[pg.ID] = g
			order = append(order, pg.ID)
		}
		g.pools = append(g.pools, p.Name)
		g.max += p.MaxSize
	}
	var errs []error
	for _, id := range order {
		g := groups[id]
		foreign := 0
		for _, member := range g.pg.Servers {
			if !slices.Contains(g.pools, poolOf(member)) {
				foreign++
			}
		}
		if room := maxPlacementGroupServers - foreign; g.max > room {
			errs = append(errs, fieldErr(fmt.Sprintf("nodeConfigs.%s.placementGroup", g.pools[0]), "placement group %q has room for %d servers (%d of %d taken by other servers) but pools %s may grow to %d", g.pg.Name, room, foreign, maxPlacementGroupServers, strings.Join(g.pools, ", "), g.max))
		}
	}
	return errs
}

// checkSubnets verifies that every subnet range a pool uses is a subnet of
// the network, compared as prefixes.
func checkSubnets(cfg *config.Config, network *hcloud.Network) []error {
	if network == nil {
		return nil
	}
	var errs []error
	have := map[netip.Prefix]bool{}
	for _, s := range network.Subnets {
		if s.IPRange == nil {
			continue
		}
		ones, _ := s.IPRange.Mask.Size()
		addr, ok := netip.AddrFromSlice(s.IPRange.IP)
		if !ok {
			continue
		}
		have[netip.PrefixFrom(addr.Unmap(), ones).Masked()] = true
	}
	if d := cfg.DefaultSubnetIPRange; d.IsValid() && !have[d.Masked()] {
		errs = append(errs, fieldErr("defaultSubnetIPRange", "%s is not a subnet of network %q", d, network.Name))
	}
	for _, p := range cfg.Pools {
		r := p.SubnetIPRange
		if !r.IsValid() || r == cfg.DefaultSubnetIPRange {
			continue
		}
		if !have[r.Masked()] {
			errs = append(errs, fieldErr(fmt.Sprintf("nodeConfigs.%s.subnetIPRange", p.Name), "%s is not a subnet of network %q", r, network.Name))
		}
	}
	return errs
}

// fieldErr is a problem of the setting at path, in the form config uses, so
// that callers list New's problems and Load's alike (config.FieldErrors).
func fieldErr(path, format string, args ...any) error {
	return &config.FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}
