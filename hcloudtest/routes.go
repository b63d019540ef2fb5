package hcloudtest

import "strings"

// buildRoutes lists the operations the fake serves. The pattern doubles as
// the template of the request log.
func (s *Server) buildRoutes() []route {
	defs := []struct {
		pattern string
		handle  handlerFunc
	}{
		// The literal /servers/actions routes come before /servers/{id},
		// which would take "actions" for an ID.
		{"GET /servers/actions", handleListResourceActions("server")},
		{"GET /servers/actions/{id}", handleGetResourceAction("server")},
		{"GET /servers", handleListServers},
		{"POST /servers", handleCreateServer},
		{"GET /servers/{id}", handleGetServer},
		{"PUT /servers/{id}", handleUpdateServer},
		{"DELETE /servers/{id}", handleDeleteServer},
		{"POST /servers/{id}/actions/poweron", handlePower(powerOn)},
		{"POST /servers/{id}/actions/poweroff", handlePower(powerOff)},
		{"POST /servers/{id}/actions/shutdown", handlePower(shutdown)},
		{"POST /servers/{id}/actions/reboot", handlePower(reboot)},
		{"POST /servers/{id}/actions/reset", handlePower(reset)},
		{"POST /servers/{id}/actions/attach_to_network", handleAttachToNetwork},
		{"POST /servers/{id}/actions/detach_from_network", handleDetachFromNetwork},
		{"GET /servers/{id}/actions", handleListActionsOf("server")},
		{"GET /servers/{id}/actions/{action_id}", handleGetActionOf("server")},
		{"GET /actions", handleListActions},
		{"GET /actions/{id}", handleGetAction},
		{"GET /server_types", handleListServerTypes},
		{"GET /server_types/{id}", handleGetServerType},
		{"GET /locations", handleListLocations},
		{"GET /locations/{id}", handleGetLocation},
		{"GET /images", handleListImages},
		{"GET /images/{id}", handleGetImage},
		{"GET /networks", handleListNetworks},
		{"GET /networks/{id}", handleGetNetwork},
		{"GET /firewalls", handleListFirewalls},
		{"GET /firewalls/{id}", handleGetFirewall},
		{"GET /ssh_keys", handleListSSHKeys},
		{"GET /ssh_keys/{id}", handleGetSSHKey},
		{"GET /placement_groups", handleListPlacementGroups},
		{"GET /placement_groups/{id}", handleGetPlacementGroup},
		{"POST /placement_groups", handleCreatePlacementGroup},
		{"DELETE /placement_groups/{id}", handleDeletePlacementGroup},
		{"GET /pricing", handlePricing},
		{"GET /datacenters", handleDatacenters},
		{"GET /datacenters/{id}", handleDatacenters},
		{"GET /primary_ips/actions", handleListResourceActions("primary_ip")},
		{"GET /primary_ips/actions/{id}", handleGetResourceAction("primary_ip")},
		{"GET /primary_ips", handleListPrimaryIPs},
		{"POST /primary_ips", handleCreatePrimaryIP},
		{"GET /primary_ips/{id}", handleGetPrimaryIP},
		{"GET /primary_ips/{id}/actions", handleListActionsOf("primary_ip")},
		{"GET /primary_ips/{id}/actions/{action_id}", handleGetActionOf("primary_ip")},
		{"PUT /primary_ips/{id}", handleUpdatePrimaryIP},
		{"DELETE /primary_ips/{id}", handleDeletePrimaryIP},
		{"POST /primary_ips/{id}/actions/assign", handleAssignPrimaryIP},
		{"POST /primary_ips/{id}/actions/unassign", handleUnassignPrimaryIP},
	}
	routes := make([]route, 0, len(defs))
	for _, d := range defs {
		method, path, _ := strings.Cut(d.pattern, " ")
		routes = append(routes, route{
			method:   method,
			parts:    strings.Split(strings.Trim(path, "/"), "/"),
			template: d.pattern,
			handle:   d.handle,
		})
	}
	return routes
}
