package hcloudtest

import (
	"cmp"
	"maps"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// This file serves the resources a server refers to at create: firewalls,
// SSH keys and placement groups. Their membership lists are derived from
// the servers, so they can never disagree with them.

func (st *state) renderFirewall(fw *schema.Firewall) schema.Firewall {
	out := *fw
	out.Labels = maps.Clone(fw.Labels)
	out.Rules = slices.Clone(fw.Rules)
	out.AppliedTo = []schema.FirewallResource{}
	for _, srv := range st.sortedServers() {
		if slices.Contains(srv.firewalls, fw.ID) {
			out.AppliedTo = append(out.AppliedTo, schema.FirewallResource{Type: "server", Server: &schema.FirewallResourceServer{ID: srv.id}})
		}
	}
	return out
}

func (st *state) renderPlacementGroup(pg *schema.PlacementGroup) schema.PlacementGroup {
	out := *pg
	out.Labels = maps.Clone(pg.Labels)
	out.Servers = []int64{}
	for _, srv := range st.sortedServers() {
		if srv.placementGroup == pg.ID {
			out.Servers = append(out.Servers, srv.id)
		}
	}
	return out
}

func (st *state) sortedServers() []*serverRec {
	return st.selectServers(nil, nil)
}

// named is what the list endpoints of the referenced resources share.
type named interface {
	*schema.Firewall | *schema.SSHKey | *schema.PlacementGroup
}

func listNamed[T named](r *request, all map[int64]T, key string, keep func(T) bool, id func(T) int64, name func(T) string, labels func(T) map[string]string, render func(T) any) (response, *apiError) {
	sel, err := selectorQuery(r)
	if err != nil {
		return response{}, err
	}
	want := r.query.Get("name")
	var list []T
	for _, v := range all {
		if (want == "" || name(v) == want) && sel.matches(labels(v)) && (keep == nil || keep(v)) {
			list = append(list, v)
		}
	}
	sorts := map[string]func(a, b T) int{
		"id":   func(a, b T) int { return cmp.Compare(id(a), id(b)) },
		"name": func(a, b T) int { return cmp.Compare(name(a), name(b)) },
	}
	if err := sortList(list, r.query["sort"], sorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]any, len(page))
	for i, v := range page {
		out[i] = render(v)
	}
	return ok200(map[string]any{key: out, "meta": m}), nil
}

func handleGetFirewall(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	fw, ok := s.st.firewalls[id]
	if !ok {
		return response{}, notFound("firewall")
	}
	return ok200(schema.FirewallGetResponse{Firewall: s.st.renderFirewall(fw)}), nil
}

func handleListFirewalls(s *Server, r *request) (response, *apiError) {
	return listNamed(r, s.st.firewalls, "firewalls", nil,
		func(f *schema.Firewall) int64 { return f.ID },
		func(f *schema.Firewall) string { return f.Name },
		func(f *schema.Firewall) map[string]string { return f.Labels },
		func(f *schema.Firewall) any { return s.st.renderFirewall(f) })
}

func handleGetSSHKey(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	k, ok := s.st.sshKeys[id]
	if !ok {
		return response{}, notFound("ssh key")
	}
	out := *k
	out.Labels = maps.Clone(k.Labels)
	return ok200(schema.SSHKeyGetResponse{SSHKey: out}), nil
}

func handleListSSHKeys(s *Server, r *request) (response, *apiError) {
	fp := r.query.Get("fingerprint")
	return listNamed(r, s.st.sshKeys, "ssh_keys",
		func(k *schema.SSHKey) bool { return fp == "" || k.Fingerprint == fp },
		func(k *schema.SSHKey) int64 { return k.ID },
		func(k *schema.SSHKey) string { return k.Name },
		func(k *schema.SSHKey) map[string]string { return k.Labels },
		func(k *schema.SSHKey) any {
			out := *k
			out.Labels = maps.Clone(k.Labels)
			return out
		})
}

func handleGetPlacementGroup(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	pg, ok := s.st.placementGroups[id]
	if !ok {
		return response{}, notFound("placement group")
	}
	return ok200(schema.PlacementGroupGetResponse{PlacementGroup: s.st.renderPlacementGroup(pg)}), nil
}

func handleListPlacementGroups(s *Server, r *request) (response, *apiError) {
	typ := r.query.Get("type")
	return listNamed(r, s.st.placementGroups, "placement_groups",
		func(pg *schema.PlacementGroup) bool { return typ == "" || pg.Type == typ },
		func(pg *schema.PlacementGroup) int64 { return pg.ID },
		func(pg *schema.PlacementGroup) string { return pg.Name },
		func(pg *schema.PlacementGroup) map[string]string { return pg.Labels },
		func(pg *schema.PlacementGroup) any { return s.st.renderPlacementGroup(pg) })
}
