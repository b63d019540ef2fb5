package hcloudtest

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// Primary IP types of the API.
const (
	primaryIPv4 = "ipv4"
	primaryIPv6 = "ipv6"
)

// primaryIPRec is one Primary IP of the project. A server's public IPv4
// and IPv6 are Primary IPs; the server record keeps their IDs as an
// index, so that assignee and server always agree.
type primaryIPRec struct {
	id         int64
	name       string
	typ        string // primaryIPv4 or primaryIPv6
	ip         string // an address, or a /64 network for IPv6
	locationID int64
	assignee   int64 // server ID; 0 when unassigned
	autoDelete bool
	labels     map[string]string
	created    time.Time
}

// standalonePublicIP derives the address of a Primary IP created on its
// own from its ID: IPv4 from 100.64.0.0/10, IPv6 from 2001:db8:8000::/33,
// apart from the addresses of the IPs created with servers.
func standalonePublicIP(typ string, id int64) string {
	n := id - firstIDs["primary_ip"]
	if typ == primaryIPv4 {
		return fmt.Sprintf("100.%d.%d.%d", 64+(n>>16)&0x3f, (n>>8)&0xff, n&0xff)
	}
	return fmt.Sprintf("2001:db8:%x::/64", 0x8000|n&0x7fff)
}

// newPrimaryIP records a Primary IP; name defaults to the API's
// primary_ip-<id>.
func (st *state) newPrimaryIP(typ, ip, name string, locationID int64, autoDelete bool, labels map[string]string, now time.Time) *primaryIPRec {
	id := st.nextID("primary_ip")
	if ip == "" {
		ip = standalonePublicIP(typ, id)
	}
	p := &primaryIPRec{
		id:         id,
		name:       cmp.Or(name, fmt.Sprintf("primary_ip-%d", id)),
		typ:        typ,
		ip:         ip,
		locationID: locationID,
		autoDelete: autoDelete,
		labels:     nonNil(maps.Clone(labels)),
		created:    now,
	}
	st.primaryIPs[id] = p
	return p
}

// assignPrimaryIP makes p the server's IP of its type.
func (st *state) assignPrimaryIP(p *primaryIPRec, srv *serverRec) {
	p.assignee = srv.id
	if p.typ == primaryIPv4 {
		srv.ipv4ID = p.id
	} else {
		srv.ipv6ID = p.id
	}
}

// unassignPrimaryIP takes p off its server, if it has one.
func (st *state) unassignPrimaryIP(p *primaryIPRec) {
	if srv, ok := st.servers[p.assignee]; ok {
		if srv.ipv4ID == p.id {
			srv.ipv4ID = 0
		}
		if srv.ipv6ID == p.id {
			srv.ipv6ID = 0
		}
	}
	p.assignee = 0
}

// createServerPrimaryIPs gives a new server its public IPs as the API
// does: none for a version public_net disables ("if false, no IPv4
// address will be attached", even when an ID is named), else the existing
// Primary IP named in public_net.ipv4/ipv6 or a new one (auto_delete true,
// the address derived from the server ID).
func (st *state) createServerPrimaryIPs(srv *serverRec, pub *schema.ServerCreatePublicNet, now time.Time) {
	v4, v6 := serverPublicIPs(srv.id)
	for _, want := range namedPrimaryIPs(pub) {
		switch {
		case !want.enabled:
		case want.id != 0:
			st.assignPrimaryIP(st.primaryIPs[want.id], srv)
		case want.typ == primaryIPv4:
			st.assignPrimaryIP(st.newPrimaryIP(primaryIPv4, v4, "", srv.locationID, true, nil, now), srv)
		default:
			st.assignPrimaryIP(st.newPrimaryIP(primaryIPv6, v6, "", srv.locationID, true, nil, now), srv)
		}
	}
}

// wantedIP is one IP version of a create request's public_net.
type wantedIP struct {
	typ     string
	enabled bool
	id      int64 // an existing Primary IP; 0: a new one
}

// namedPrimaryIPs reads public_net; without it the API gives both
// versions.
func namedPrimaryIPs(pub *schema.ServerCreatePublicNet) [2]wantedIP {
	if pub == nil {
		pub = &schema.ServerCreatePublicNet{EnableIPv4: true, EnableIPv6: true}
	}
	return [2]wantedIP{
		{primaryIPv4, pub.EnableIPv4, pub.IPv4ID},
		{primaryIPv6, pub.EnableIPv6, pub.IPv6ID},
	}
}

// publicNetLocation is the location of the first existing Primary IP a
// create request uses, nil for none. A server created without a location
// goes where its Primary IP is, since an IP is bound to its location.
func (st *state) publicNetLocation(pub *schema.ServerCreatePublicNet) *schema.Location {
	for _, want := range namedPrimaryIPs(pub) {
		if p, ok := st.primaryIPs[want.id]; ok && want.enabled {
			return st.locationByID(p.locationID)
		}
	}
	return nil
}

// checkCreatePublicNet checks the Primary IPs a create request uses: they
// exist, have the right version, are free and are in the server's
// location.
func (st *state) checkCreatePublicNet(pub *schema.ServerCreatePublicNet, loc *schema.Location) *apiError {
	for _, want := range namedPrimaryIPs(pub) {
		if want.id == 0 || !want.enabled {
			continue
		}
		p, ok := st.primaryIPs[want.id]
		switch {
		case !ok:
			return newError("invalid_input", "primary ip %d not found", want.id)
		case p.typ != want.typ:
			return newError("primary_ip_version_mismatch", "primary ip %d is not of type %s", p.id, want.typ)
		case p.assignee != 0:
			return newError("primary_ip_assigned", "primary ip %d is already assigned to server %d", p.id, p.assignee)
		case p.locationID != loc.ID:
			return newError("primary_ip_datacenter_mismatch", "primary ip %d is not in location %s", p.id, loc.Name)
		}
	}
	return nil
}

// releasePrimaryIPs runs when a server is gone: its Primary IPs with
// auto_delete go with it, the others stay, unassigned.
func (st *state) releasePrimaryIPs(srv *serverRec) {
	for _, id := range []int64{srv.ipv4ID, srv.ipv6ID} {
		p, ok := st.primaryIPs[id]
		if !ok {
			continue
		}
		st.unassignPrimaryIP(p)
		if p.autoDelete {
			delete(st.primaryIPs, id)
		}
	}
}

func (st *state) renderPrimaryIP(p *primaryIPRec) schema.PrimaryIP {
	out := schema.PrimaryIP{
		ID:           p.id,
		IP:           p.ip,
		Labels:       maps.Clone(p.labels),
		Name:         p.name,
		Type:         p.typ,
		DNSPtr:       []schema.PrimaryIPDNSPTR{},
		AssigneeType: "unassigned",
		AutoDelete:   p.autoDelete,
		Created:      p.created,
		Location:     *st.locationByID(p.locationID),
	}
	if p.typ == primaryIPv4 {
		out.DNSPtr = append(out.DNSPtr, schema.PrimaryIPDNSPTR{IP: p.ip, DNSPtr: defaultDNSPtr(p.ip)})
	}
	if p.assignee != 0 {
		id := p.assignee
		out.AssigneeID, out.AssigneeType = &id, "server"
	}
	return out
}

func defaultDNSPtr(ip string) string { return "static." + ip + ".clients.your-server.de" }

func (s *Server) primaryIPFromPath(r *request) (*primaryIPRec, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	p, ok := s.st.primaryIPs[id]
	if !ok {
		return nil, notFound("primary ip")
	}
	return p, nil
}

func handleGetPrimaryIP(s *Server, r *request) (response, *apiError) {
	p, err := s.primaryIPFromPath(r)
	if err != nil {
		return response{}, err
	}
	return ok200(schema.PrimaryIPGetResponse{PrimaryIP: s.st.renderPrimaryIP(p)}), nil
}

var primaryIPSorts = map[string]func(a, b *primaryIPRec) int{
	"id":      func(a, b *primaryIPRec) int { return cmp.Compare(a.id, b.id) },
	"created": func(a, b *primaryIPRec) int { return a.created.Compare(b.created) },
}

// handleListPrimaryIPs answers GET /primary_ips, filtered by name, ip and
// label selector.
func handleListPrimaryIPs(s *Server, r *request) (response, *apiError) {
	sel, err := selectorQuery(r)
	if err != nil {
		return response{}, err
	}
	name, ip := r.query.Get("name"), r.query.Get("ip")
	var list []*primaryIPRec
	for _, p := range s.st.primaryIPs {
		if (name == "" || p.name == name) && (ip == "" || p.ip == ip) && sel.matches(p.labels) {
			list = append(list, p)
		}
	}
	if err := sortList(list, r.query["sort"], primaryIPSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]schema.PrimaryIP, len(page))
	for i, p := range page {
		out[i] = s.st.renderPrimaryIP(p)
	}
	return ok200(map[string]any{"primary_ips": out, "meta": m}), nil
}

// handleCreatePrimaryIP answers POST /primary_ips: a Primary IP in a
// location, or assigned at once to a server (which must be off), then in
// the server's location with an assign_primary_ip action.
func handleCreatePrimaryIP(s *Server, r *request) (response, *apiError) {
	var body struct {
		schema.PrimaryIPCreateRequest
		removedFields
	}
	if err := decodeBody(r, &body); err != nil {
		return response{}, err
	}
	req := body.PrimaryIPCreateRequest
	var labels map[string]string
	if req.Labels != nil {
		labels = *req.Labels
	}
	if err := s.st.validatePrimaryIPCreate(&req, body.removedFields, labels); err != nil {
		return response{}, err
	}
	var srv *serverRec
	var loc *schema.Location
	if req.AssigneeID != nil {
		var err *apiError
		if srv, err = s.st.assignableServer(*req.AssigneeID, req.Type); err != nil {
			return response{}, err
		}
		loc = s.st.locationByID(srv.locationID)
	} else if loc = s.st.locationByIDOrName(req.Location); loc == nil {
		return response{}, newError("invalid_input", "location not found")
	}
	p := s.st.newPrimaryIP(req.Type, "", req.Name, loc.ID, req.AutoDelete != nil && *req.AutoDelete, labels, r.now)
	resp := schema.PrimaryIPCreateResponse{PrimaryIP: s.st.renderPrimaryIP(p)}
	if srv != nil {
		s.st.assignPrimaryIP(p, srv)
		a := s.st.startAction("create_primary_ip", r.now, nil, ref("primary_ip", p.id), ref("server", srv.id))
		as := a.schema(r.now)
		resp.PrimaryIP, resp.Action = s.st.renderPrimaryIP(p), &as
	}
	return response{status: http.StatusCreated, body: resp}, nil
}

// validatePrimaryIPCreate reports every malformed field of a create
// request at once, then a name already taken.
func (st *state) validatePrimaryIPCreate(req *schema.PrimaryIPCreateRequest, removed removedFields, labels map[string]string) *apiError {
	var fe fieldErrors
	removed.check(&fe)
	if req.Name == "" {
		fe.add("name", "Missing data for required field.")
	}
	if req.Type != primaryIPv4 && req.Type != primaryIPv6 {
		fe.add("type", "must be one of ipv4, ipv6")
	}
	if req.AssigneeType != "" && req.AssigneeType != "server" {
		fe.add("assignee_type", "must be server")
	}
	switch {
	case req.AssigneeID == nil && req.Location == "":
		fe.add("location", "either location or assignee_id is required")
	case req.AssigneeID != nil && req.Location != "":
		fe.add("location", "location and assignee_id are mutually exclusive")
	}
	for _, p := range validateLabels(labels) {
		fe.add("labels", "%s", p)
	}
	if err := fe.err(); err != nil {
		return err
	}
	for _, p := range st.primaryIPs {
		if p.name == req.Name {
			return newError("uniqueness_error", "primary ip name is already used")
		}
	}
	return nil
}

// assignableServer finds a server that can take a Primary IP of typ: it
// exists, no action runs on it, it is off, and has none of that type yet.
func (st *state) assignableServer(id int64, typ string) (*serverRec, *apiError) {
	srv, ok := st.servers[id]
	switch {
	case !ok:
		return nil, newError("invalid_input", "server %d not found", id)
	case st.lockedBy("server", id):
		return nil, newError("locked", "server %d is locked: another action is running", id)
	case srv.status != statusOff:
		return nil, newError("server_not_stopped", "server %d must be powered off", id)
	case typ == primaryIPv4 && srv.ipv4ID != 0:
		return nil, newError("server_has_ipv4", "server %d already has an ipv4 address", id)
	case typ == primaryIPv6 && srv.ipv6ID != 0:
		return nil, newError("server_has_ipv6", "server %d already has an ipv6 address", id)
	}
	return srv, nil
}

// handleUpdatePrimaryIP answers PUT /primary_ips/{id} (name, labels,
// auto_delete).
func handleUpdatePrimaryIP(s *Server, r *request) (response, *apiError) {
	p, err := s.primaryIPFromPath(r)
	if err != nil {
		return response{}, err
	}
	var req schema.PrimaryIPUpdateRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	if req.Labels != nil {
		if problems := validateLabels(*req.Labels); len(problems) > 0 {
			return response{}, invalidField("labels", "%s", problems[0])
		}
	}
	if req.Name != "" && req.Name != p.name {
		for _, other := range s.st.primaryIPs {
			if other.name == req.Name {
				return response{}, newError("uniqueness_error", "primary ip name is already used")
			}
		}
		p.name = req.Name
	}
	if req.Labels != nil {
		p.labels = nonNil(maps.Clone(*req.Labels))
	}
	if req.AutoDelete != nil {
		p.autoDelete = *req.AutoDelete
	}
	return ok200(schema.PrimaryIPUpdateResponse{PrimaryIP: s.st.renderPrimaryIP(p)}), nil
}

// handleDeletePrimaryIP answers DELETE /primary_ips/{id} with 204. Since
// 2026-05-01 an assigned Primary IP must be unassigned first.
func handleDeletePrimaryIP(s *Server, r *request) (response, *apiError) {
	p, err := s.primaryIPFromPath(r)
	if err != nil {
		return response{}, err
	}
	if err := s.st.checkPrimaryIPLock(p); err != nil {
		return response{}, err
	}
	if p.assignee != 0 {
		return response{}, newError("must_be_unassigned", "primary ip %d is assigned to server %d", p.id, p.assignee)
	}
	delete(s.st.primaryIPs, p.id)
	return response{status: http.StatusNoContent}, nil
}

// checkUnassign refuses to take p off a server that is not off, or while
// an action runs on either.
func (st *state) checkUnassign(p *primaryIPRec) *apiError {
	if err := st.checkPrimaryIPLock(p); err != nil {
		return err
	}
	srv, ok := st.servers[p.assignee]
	if ok && st.lockedBy("server", srv.id) {
		return newError("locked", "server %d is locked: another action is running", srv.id)
	}
	if ok && srv.status != statusOff {
		return newError("server_not_stopped", "server %d must be powered off", srv.id)
	}
	return nil
}

// handleAssignPrimaryIP answers POST /primary_ips/{id}/actions/assign.
func handleAssignPrimaryIP(s *Server, r *request) (response, *apiError) {
	p, err := s.primaryIPFromPath(r)
	if err != nil {
		return response{}, err
	}
	var req schema.PrimaryIPActionAssignRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	// Unlike a create's, an assign's assignee_type is required.
	var fe fieldErrors
	if req.AssigneeType != "server" {
		fe.add("assignee_type", "must be one of: server")
	}
	if req.AssigneeID == 0 {
		fe.add("assignee_id", "Missing data for required field.")
	}
	if err := fe.err(); err != nil {
		return response{}, err
	}
	if err := s.st.checkPrimaryIPLock(p); err != nil {
		return response{}, err
	}
	if p.assignee != 0 {
		return response{}, newError("primary_ip_already_assigned", "primary ip %d is already assigned to server %d", p.id, p.assignee)
	}
	srv, err := s.st.assignableServer(req.AssigneeID, p.typ)
	if err != nil {
		return response{}, err
	}
	if srv.locationID != p.locationID {
		return response{}, newError("primary_ip_datacenter_mismatch", "primary ip %d and server %d are in different locations", p.id, srv.id)
	}
	s.st.assignPrimaryIP(p, srv)
	a := s.st.startAction("assign_primary_ip", r.now, nil, ref("primary_ip", p.id), ref("server", srv.id))
	return response{status: http.StatusCreated, body: schema.PrimaryIPActionAssignResponse{Action: a.schema(r.now)}}, nil
}

// handleUnassignPrimaryIP answers POST /primary_ips/{id}/actions/unassign.
func handleUnassignPrimaryIP(s *Server, r *request) (response, *apiError) {
	p, err := s.primaryIPFromPath(r)
	if err != nil {
		return response{}, err
	}
	if err := s.st.checkUnassign(p); err != nil {
		return response{}, err
	}
	resources := []schema.ActionResourceReference{ref("primary_ip", p.id)}
	if p.assignee != 0 {
		resources = append(resources, ref("server", p.assignee))
	}
	s.st.unassignPrimaryIP(p)
	a := s.st.startAction("unassign_primary_ip", r.now, nil, resources...)
	return response{status: http.StatusCreated, body: schema.PrimaryIPActionUnassignResponse{Action: a.schema(r.now)}}, nil
}

// primaryIPAddress is the address of a Primary IP, empty for none.
func (st *state) primaryIPAddress(id int64) string {
	if p, ok := st.primaryIPs[id]; ok {
		return p.ip
	}
	return ""
}

// checkPrimaryIPLock refuses an action on p while another one runs on it.
func (st *state) checkPrimaryIPLock(p *primaryIPRec) *apiError {
	if st.lockedBy("primary_ip", p.id) {
		return newError("locked", "primary ip %d is locked: another action is running", p.id)
	}
	return nil
}
