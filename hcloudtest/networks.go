package hcloudtest

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

func (st *state) usedIPs(network int64) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	for _, srv := range st.servers {
		for _, pn := range srv.privateNets {
			if pn.Network == network {
				if a, err := netip.ParseAddr(pn.IP); err == nil {
					used[a] = true
				}
			}
		}
	}
	return used
}

// allocatePrivateIP picks the subnet and address for a server joining a
// network: the subnet with ipRange if given, else the first subnet in the
// server's network zone; the address ip if given, else the first free host
// of the subnet. The network's first address is its gateway and is never
// handed out.
func (st *state) allocatePrivateIP(n *schema.Network, zone, ip, ipRange string) (schema.ServerPrivateNet, *apiError) {
	var subnet *schema.NetworkSubnet
	if ipRange != "" {
		want, err := netip.ParsePrefix(ipRange)
		if err != nil {
			return schema.ServerPrivateNet{}, invalidField("ip_range", "%q is not a CIDR", ipRange)
		}
		for i := range n.Subnets {
			if p, err := netip.ParsePrefix(n.Subnets[i].IPRange); err == nil && p.Masked() == want.Masked() {
				subnet = &n.Subnets[i]
			}
		}
		if subnet == nil {
			return schema.ServerPrivateNet{}, invalidField("ip_range", "network %d has no subnet %s", n.ID, ipRange)
		}
		if subnet.NetworkZone != zone {
			return schema.ServerPrivateNet{}, newError("no_subnet_available", "subnet %s is not in network zone %s", ipRange, zone)
		}
	} else {
		for i := range n.Subnets {
			if n.Subnets[i].NetworkZone == zone && n.Subnets[i].Type != "vswitch" {
				subnet = &n.Subnets[i]
				break
			}
		}
		if subnet == nil {
			return schema.ServerPrivateNet{}, newError("no_subnet_available", "network %d has no subnet in network zone %s", n.ID, zone)
		}
	}
	prefix, err := netip.ParsePrefix(subnet.IPRange)
	if err != nil {
		return schema.ServerPrivateNet{}, newError("server_error", "subnet %s is malformed", subnet.IPRange)
	}
	prefix = prefix.Masked()
	used := st.usedIPs(n.ID)
	if netRange, err := parsePrefix(n.IPRange); err == nil {
		used[netRange.Addr().Next()] = true // the gateway
	}
	var addr netip.Addr
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !prefix.Contains(a) || used[a] || a == prefix.Addr() {
			return schema.ServerPrivateNet{}, newError("ip_not_available", "IP %s is not available in subnet %s", ip, subnet.IPRange)
		}
		addr = a
	} else {
		for a := prefix.Addr().Next(); prefix.Contains(a); a = a.Next() {
			if !used[a] {
				addr = a
				break
			}
		}
		if !addr.IsValid() {
			return schema.ServerPrivateNet{}, newError("no_subnet_available", "subnet %s is full", subnet.IPRange)
		}
	}
	b := addr.As16()
	return schema.ServerPrivateNet{
		Network:    n.ID,
		IP:         addr.String(),
		AliasIPs:   []string{},
		MACAddress: fmt.Sprintf("86:00:00:%02x:%02x:%02x", b[13], b[14], b[15]),
	}, nil
}

func (st *state) renderNetwork(n *schema.Network) schema.Network {
	out := *n
	out.Subnets = slices.Clone(n.Subnets)
	out.Routes = slices.Clone(n.Routes)
	out.Labels = maps.Clone(n.Labels)
	out.Servers = []int64{}
	out.LoadBalancers = []int64{}
	for _, srv := range st.servers {
		for _, pn := range srv.privateNets {
			if pn.Network == n.ID {
				out.Servers = append(out.Servers, srv.id)
			}
		}
	}
	slices.Sort(out.Servers)
	return out
}

var networkSorts = map[string]func(a, b *schema.Network) int{
	"id":      func(a, b *schema.Network) int { return cmp.Compare(a.ID, b.ID) },
	"name":    func(a, b *schema.Network) int { return cmp.Compare(a.Name, b.Name) },
	"created": func(a, b *schema.Network) int { return a.Created.Compare(b.Created) },
}

func handleGetNetwork(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	n, ok := s.st.networks[id]
	if !ok {
		return response{}, notFound("network")
	}
	return ok200(schema.NetworkGetResponse{Network: s.st.renderNetwork(n)}), nil
}

func handleListNetworks(s *Server, r *request) (response, *apiError) {
	sel, err := selectorQuery(r)
	if err != nil {
		return response{}, err
	}
	name := r.query.Get("name")
	var list []*schema.Network
	for _, n := range s.st.networks {
		if (name == "" || n.Name == name) && sel.matches(n.Labels) {
			list = append(list, n)
		}
	}
	if err := sortList(list, r.query["sort"], networkSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]schema.Network, len(page))
	for i, n := range page {
		out[i] = s.st.renderNetwork(n)
	}
	return ok200(map[string]any{"networks": out, "meta": m}), nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}
