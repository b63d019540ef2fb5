package hcloudtest

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// Server status values of the API.
const (
	statusInitializing = "initializing"
	statusStarting     = "starting"
	statusRunning      = "running"
	statusStopping     = "stopping"
	statusOff          = "off"
	statusDeleting     = "deleting"
)

// MaxPlacementGroupServers is how many servers a spread placement group
// holds.
const MaxPlacementGroupServers = 10

// maxUserData is the API's limit on cloud-init user data.
const maxUserData = 32 * 1024

// serverRec is one server of the project. Catalogue entries are referred
// to by ID so that the record never points into a slice.
type serverRec struct {
	id             int64
	name           string
	status         string
	created        time.Time
	typeID         int64
	locationID     int64
	imageID        int64
	labels         map[string]string
	userData       string
	sshKeys        []int64
	privateNets    []schema.ServerPrivateNet
	firewalls      []int64
	placementGroup int64
	ipv4ID, ipv6ID int64 // the Primary IPs assigned to the server; 0: none
	rescue         bool
}

// hostnameRE accepts what the API accepts as a server name: a hostname of
// letters, digits, hyphens and dots, alphanumeric at both ends of each
// label.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

func validServerName(name string) string {
	switch {
	case name == "":
		return "Missing data for required field."
	case len(name) > 63:
		return "name must be at most 63 characters"
	case !hostnameRE.MatchString(name):
		return "name must be a valid hostname"
	}
	return ""
}

// serverJSON is a server as the API renders it. schema.ServerPublicNet
// holds IPv4 and IPv6 by value, which would render a server without one
// as an empty object where the API sends null; the outer PublicNet
// shadows it in the JSON.
type serverJSON struct {
	schema.Server
	PublicNet serverPublicNetJSON `json:"public_net"`
}

type serverPublicNetJSON struct {
	IPv4        *schema.ServerPublicNetIPv4 `json:"ipv4"`
	IPv6        *schema.ServerPublicNetIPv6 `json:"ipv6"`
	FloatingIPs []int64                     `json:"floating_ips"`
	Firewalls   []schema.ServerFirewall     `json:"firewalls"`
}

func (st *state) renderServer(srv *serverRec) serverJSON {
	out := serverJSON{Server: st.renderServerSchema(srv)}
	pub := out.Server.PublicNet
	out.PublicNet = serverPublicNetJSON{FloatingIPs: pub.FloatingIPs, Firewalls: pub.Firewalls}
	if pub.IPv4.ID != 0 {
		out.PublicNet.IPv4 = &pub.IPv4
	}
	if pub.IPv6.ID != 0 {
		out.PublicNet.IPv6 = &pub.IPv6
	}
	return out
}

func (st *state) renderServerSchema(srv *serverRec) schema.Server {
	stype := serverTypeAsOf(*st.serverTypeByID(srv.typeID), st.now)
	loc := *st.locationByID(srv.locationID)
	out := schema.Server{
		ID:            srv.id,
		Name:          srv.name,
		Status:        srv.status,
		Created:       srv.created,
		ServerType:    stype,
		Location:      loc,
		Labels:        maps.Clone(srv.labels),
		Volumes:       []int64{},
		LoadBalancers: []int64{},
		PrivateNet:    []schema.ServerPrivateNet{},
		Locked:        st.lockedBy("server", srv.id),
		RescueEnabled: srv.rescue,
		PublicNet: schema.ServerPublicNet{
			FloatingIPs: []int64{},
			Firewalls:   []schema.ServerFirewall{},
		},
		PrimaryDiskSize: stype.Disk,
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	zero := uint64(0)
	out.OutgoingTraffic, out.IngoingTraffic = &zero, &zero
	for _, p := range stype.Prices {
		if p.Location == loc.Name {
			out.IncludedTraffic = p.IncludedTraffic
		}
	}
	if p, ok := st.primaryIPs[srv.ipv4ID]; ok {
		out.PublicNet.IPv4 = schema.ServerPublicNetIPv4{ID: p.id, IP: p.ip, DNSPtr: defaultDNSPtr(p.ip)}
	}
	if p, ok := st.primaryIPs[srv.ipv6ID]; ok {
		out.PublicNet.IPv6 = schema.ServerPublicNetIPv6{ID: p.id, IP: p.ip, DNSPtr: []schema.ServerPublicNetIPv6DNSPtr{}}
	}
	// The API applies a new server's firewalls while it is created.
	fwStatus := "applied"
	if srv.status == statusInitializing {
		fwStatus = "pending"
	}
	for _, fw := range srv.firewalls {
		out.PublicNet.Firewalls = append(out.PublicNet.Firewalls, schema.ServerFirewall{ID: fw, Status: fwStatus})
	}
	for _, pn := range srv.privateNets {
		pn.AliasIPs = slices.Clone(pn.AliasIPs)
		out.PrivateNet = append(out.PrivateNet, pn)
	}
	if img, ok := st.images[srv.imageID]; ok {
		i := st.renderImage(img)
		out.Image = &i
	}
	if pg, ok := st.placementGroups[srv.placementGroup]; ok {
		p := st.renderPlacementGroup(pg)
		out.PlacementGroup = &p
	}
	return out
}

// serverPublicIPs derives stable addresses from the server ID: IPv4 from
// the 198.18.0.0/15 benchmarking range, IPv6 from the 2001:db8::/32
// documentation prefix.
func serverPublicIPs(id int64) (string, string) {
	n := id - firstIDs["server"]
	v4 := fmt.Sprintf("198.%d.%d.%d", 18+(n>>16)&1, (n>>8)&0xff, n&0xff)
	v6 := fmt.Sprintf("2001:db8:%x::/64", n&0xffff)
	return v4, v6
}

func rootPassword() string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func (st *state) serverTypeByIDOrName(v schema.IDOrName) *schema.ServerType {
	if v.ID != 0 {
		return st.serverTypeByID(v.ID)
	}
	return st.serverTypeByName(v.Name)
}

func (st *state) locationByIDOrName(v string) *schema.Location {
	if id, err := strconv.ParseInt(v, 10, 64); err == nil {
		return st.locationByID(id)
	}
	return st.locationByName(v)
}

// serverTypeAt finds the per-location entry of a server type.
func serverTypeAt(t *schema.ServerType, location string) *schema.ServerTypeLocation {
	for i := range t.Locations {
		if t.Locations[i].Name == location {
			return &t.Locations[i]
		}
	}
	return nil
}

func (st *state) placementGroupSize(id int64) int {
	n := 0
	for _, srv := range st.servers {
		if srv.placementGroup == id {
			n++
		}
	}
	return n
}

// handleCreateServer answers POST /servers. Checks run in the order the API
// reports problems: malformed input, unknown references, conflicts, then
// capacity.
func handleCreateServer(s *Server, r *request) (response, *apiError) {
	var body struct {
		schema.ServerCreateRequest
		removedFields
	}
	if err := decodeBody(r, &body); err != nil {
		return response{}, err
	}
	req := body.ServerCreateRequest
	labels, err := validateCreateServer(&req, body.removedFields)
	if err != nil {
		return response{}, err
	}
	refs, err := s.st.resolveCreateServer(&req)
	if err != nil {
		return response{}, err
	}
	if err := s.checkCreateServerFits(r, &req, refs); err != nil {
		return response{}, err
	}
	srv, err := s.st.addCreatedServer(r, &req, refs, labels)
	if err != nil {
		return response{}, err
	}
	create, next := s.st.startCreateActions(r, srv, req.StartAfterCreate == nil || *req.StartAfterCreate)
	resp := serverCreateResponse{
		Server:      s.st.renderServer(srv),
		Action:      create.schema(r.now),
		NextActions: []schema.Action{},
	}
	for _, a := range next {
		resp.NextActions = append(resp.NextActions, a.schema(r.now))
	}
	if len(req.SSHKeys) == 0 {
		pw := rootPassword()
		resp.RootPassword = &pw
	}
	return response{status: http.StatusCreated, body: resp}, nil
}

// serverCreateResponse is schema.ServerCreateResponse with the server as
// the API renders it.
type serverCreateResponse struct {
	Server       serverJSON      `json:"server"`
	Action       schema.Action   `json:"action"`
	NextActions  []schema.Action `json:"next_actions"`
	RootPassword *string         `json:"root_password"`
}

// validateCreateServer reports every malformed field of a create request
// at once and returns a copy of its labels.
func validateCreateServer(req *schema.ServerCreateRequest, removed removedFields) (map[string]string, *apiError) {
	var fe fieldErrors
	removed.check(&fe)
	if msg := validServerName(req.Name); msg != "" {
		fe.add("name", "%s", msg)
	}
	if req.ServerType.ID == 0 && req.ServerType.Name == "" {
		fe.add("server_type", "Missing data for required field.")
	}
	if req.Image.ID == 0 && req.Image.Name == "" {
		fe.add("image", "Missing data for required field.")
	}
	if len(req.UserData) > maxUserData {
		fe.add("user_data", "user_data must be at most %d bytes", maxUserData)
	}
	var labels map[string]string
	if req.Labels != nil {
		labels = maps.Clone(*req.Labels)
		for _, p := range validateLabels(labels) {
			fe.add("labels", "%s", p)
		}
	}
	if pub := req.PublicNet; pub != nil && !pub.EnableIPv4 && !pub.EnableIPv6 && len(req.Networks) == 0 {
		fe.add("public_net", "a server without public IPs must be attached to a network")
	}
	return labels, fe.err()
}

// createRefs are the resources a create request names, found.
type createRefs struct {
	stype     *schema.ServerType
	img       *schema.Image
	loc       *schema.Location
	firewalls []int64 // without repeats
}

// resolveCreateServer finds what a create request refers to; the first
// reference that does not exist is the error.
func (st *state) resolveCreateServer(req *schema.ServerCreateRequest) (createRefs, *apiError) {
	stype := st.serverTypeByIDOrName(req.ServerType)
	if stype == nil {
		return createRefs{}, newError("invalid_input", "server type not found")
	}
	img, err := st.createServerImage(req, stype)
	if err != nil {
		return createRefs{}, err
	}
	loc, err := st.createServerLocation(req, stype)
	if err != nil {
		return createRefs{}, err
	}
	if err := st.checkCreatePublicNet(req.PublicNet, loc); err != nil {
		return createRefs{}, err
	}
	firewalls, err := st.checkCreateServerAttachments(req)
	if err != nil {
		return createRefs{}, err
	}
	return createRefs{stype: stype, img: img, loc: loc, firewalls: firewalls}, nil
}

// createServerImage finds the requested image for the server type's
// architecture and checks that it can boot a server.
func (st *state) createServerImage(req *schema.ServerCreateRequest, stype *schema.ServerType) (*schema.Image, *apiError) {
	img := st.imageForArch(req.Image.ID, req.Image.Name, stype.Architecture)
	if img == nil {
		return nil, newError("invalid_input", "image not found")
	}
	if img.Architecture != stype.Architecture {
		return nil, newError("invalid_input", "image architecture %s does not match server type architecture %s", img.Architecture, stype.Architecture)
	}
	if img.Status != "available" {
		return nil, newError("invalid_input", "image is not available")
	}
	return img, nil
}

// createServerLocation finds the requested location. Without a location
// the API places the server: where its existing Primary IP is, else the
// fake takes the first location that offers the type.
func (st *state) createServerLocation(req *schema.ServerCreateRequest, stype *schema.ServerType) (*schema.Location, *apiError) {
	if req.Location != "" {
		loc := st.locationByIDOrName(req.Location)
		if loc == nil {
			return nil, newError("invalid_input", "location not found")
		}
		return loc, nil
	}
	if loc := st.publicNetLocation(req.PublicNet); loc != nil {
		return loc, nil
	}
	for _, l := range serverTypeAsOf(*stype, st.now).Locations {
		if l.Available {
			if loc := st.locationByName(l.Name); loc != nil {
				return loc, nil
			}
			break
		}
	}
	return nil, newError("resource_unavailable", "server type %s is not available in any location", stype.Name)
}

// checkCreateServerAttachments checks that the SSH keys, networks,
// firewalls and placement group of a create request exist, and returns
// the firewalls without repeats.
func (st *state) checkCreateServerAttachments(req *schema.ServerCreateRequest) ([]int64, *apiError) {
	for _, k := range req.SSHKeys {
		if _, ok := st.sshKeys[k]; !ok {
			return nil, newError("invalid_input", "ssh key %d not found", k)
		}
	}
	for _, n := range req.Networks {
		if _, ok := st.networks[n]; !ok {
			return nil, newError("invalid_input", "network %d not found", n)
		}
	}
	var firewalls []int64
	for _, f := range req.Firewalls {
		if _, ok := st.firewalls[f.Firewall]; !ok {
			return nil, newError("invalid_input", "firewall %d not found", f.Firewall)
		}
		if !slices.Contains(firewalls, f.Firewall) {
			firewalls = append(firewalls, f.Firewall)
		}
	}
	if req.PlacementGroup != 0 {
		if _, ok := st.placementGroups[req.PlacementGroup]; !ok {
			return nil, newError("invalid_input", "placement group %d not found", req.PlacementGroup)
		}
	}
	return firewalls, nil
}

// checkCreateServerFits reports why a server cannot be created now: the
// type not offered in the location, the name taken, a limit reached, or
// no capacity.
func (s *Server) checkCreateServerFits(r *request, req *schema.ServerCreateRequest, refs createRefs) *apiError {
	st := &s.st
	stype, loc := refs.stype, refs.loc
	at := serverTypeAt(stype, loc.Name)
	switch {
	case at == nil:
		return newError("invalid_input", "unsupported location for server type: %s is not offered in %s", stype.Name, loc.Name)
	case at.Deprecation != nil && !r.now.Before(at.Deprecation.UnavailableAfter):
		return newError("invalid_server_type", "server type %s is deprecated in %s", stype.Name, loc.Name)
	case !at.Available:
		return newError("resource_unavailable", "server type %s is not available in %s", stype.Name, loc.Name)
	}
	if _, taken := st.serverNames[req.Name]; taken {
		e := newError("uniqueness_error", "server name is already used")
		e.details = map[string]any{"fields": []errorField{{Name: "name", Messages: []string{"already used"}}}}
		return e
	}
	if limit := s.cfg.serverLimit; limit > 0 && len(st.servers) >= limit {
		e := newError("resource_limit_exceeded", "server limit exceeded")
		e.details = map[string]any{"limits": []map[string]string{{"name": "server_limit"}}}
		return e
	}
	if req.PlacementGroup != 0 && st.placementGroupSize(req.PlacementGroup) >= MaxPlacementGroupServers {
		return newError(ErrorCodePlacementGroupMemberLimitReached,
			"placement group with ID %d contains already %d servers", req.PlacementGroup, MaxPlacementGroupServers)
	}
	if st.faults.isUnavailable(stype.Name, loc.Name) {
		return newError("resource_unavailable",
			"we are unable to provision servers for this location, try with a different location or try later")
	}
	return nil
}

// addCreatedServer records the new server, initializing, with its private
// IPs in the requested networks and the public IPs it asked for.
func (st *state) addCreatedServer(r *request, req *schema.ServerCreateRequest, refs createRefs, labels map[string]string) (*serverRec, *apiError) {
	srv := &serverRec{
		id:             st.nextID("server"),
		name:           req.Name,
		status:         statusInitializing,
		created:        r.now,
		typeID:         refs.stype.ID,
		locationID:     refs.loc.ID,
		imageID:        refs.img.ID,
		labels:         labels,
		userData:       req.UserData,
		sshKeys:        slices.Clone(req.SSHKeys),
		firewalls:      refs.firewalls,
		placementGroup: req.PlacementGroup,
	}
	for _, n := range req.Networks {
		pn, err := st.allocatePrivateIP(st.networks[n], refs.loc.NetworkZone, "", "")
		if err != nil {
			return nil, err
		}
		srv.privateNets = append(srv.privateNets, pn)
	}
	st.createServerPrimaryIPs(srv, req.PublicNet, r.now)
	st.servers[srv.id] = srv
	st.serverNames[srv.name] = srv.id
	return srv, nil
}

// startCreateActions starts the create_server action and, chained after
// it, one attach_to_network per network and start_server if start; it
// returns the create action and the chained ones.
func (st *state) startCreateActions(r *request, srv *serverRec, start bool) (*actionRec, []*actionRec) {
	create := st.startAction("create_server", r.now, nil, ref("server", srv.id))
	create.onSuccess = func() {
		if srv.status == statusInitializing {
			srv.status = statusOff
			if start {
				srv.status = statusStarting
			}
		}
	}
	create.onError = func() {
		if srv.status == statusInitializing {
			srv.status = statusOff
		}
	}
	var next []*actionRec
	prev := create
	for _, pn := range srv.privateNets {
		a := st.startAction("attach_to_network", r.now, prev, ref("server", srv.id), ref("network", pn.Network))
		network := pn.Network
		a.onError = func() { srv.detach(network) }
		next = append(next, a)
		prev = a
	}
	if start {
		next = append(next, st.startServerAfter(r, srv, prev))
	}
	return create, next
}

// startServerAfter starts start_server once prev has finished.
func (st *state) startServerAfter(r *request, srv *serverRec, prev *actionRec) *actionRec {
	a := st.startAction("start_server", r.now, prev, ref("server", srv.id))
	a.onSuccess = func() {
		if srv.status == statusStarting {
			srv.status = statusRunning
		}
	}
	a.onError = func() {
		if srv.status == statusStarting {
			srv.status = statusOff
		}
	}
	return a
}

func (srv *serverRec) detach(network int64) {
	srv.privateNets = slices.DeleteFunc(srv.privateNets, func(pn schema.ServerPrivateNet) bool {
		return pn.Network == network
	})
}

func (s *Server) serverFromPath(r *request) (*serverRec, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	srv, ok := s.st.servers[id]
	if !ok {
		return nil, notFound("server")
	}
	return srv, nil
}

func handleGetServer(s *Server, r *request) (response, *apiError) {
	srv, err := s.serverFromPath(r)
	if err != nil {
		return response{}, err
	}
	return ok200(map[string]any{"server": s.st.renderServer(srv)}), nil
}

var serverSorts = map[string]func(a, b *serverRec) int{
	"id":      func(a, b *serverRec) int { return cmp.Compare(a.id, b.id) },
	"name":    func(a, b *serverRec) int { return cmp.Compare(a.name, b.name) },
	"created": func(a, b *serverRec) int { return a.created.Compare(b.created) },
}

func handleListServers(s *Server, r *request) (response, *apiError) {
	sel, err := selectorQuery(r)
	if err != nil {
		return response{}, err
	}
	name := r.query.Get("name")
	statuses := r.query["status"]
	list := s.st.selectServers(sel, func(srv *serverRec) bool {
		return (name == "" || srv.name == name) && (len(statuses) == 0 || slices.Contains(statuses, srv.status))
	})
	if err := sortList(list, r.query["sort"], serverSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]serverJSON, len(page))
	for i, srv := range page {
		out[i] = s.st.renderServer(srv)
	}
	return ok200(map[string]any{"servers": out, "meta": m}), nil
}

// selectServers returns the servers matching sel and keep in ID order.
func (st *state) selectServers(sel selector, keep func(*serverRec) bool) []*serverRec {
	var list []*serverRec
	for _, srv := range st.servers {
		if sel.matches(srv.labels) && (keep == nil || keep(srv)) {
			list = append(list, srv)
		}
	}
	slices.SortFunc(list, func(a, b *serverRec) int { return cmp.Compare(a.id, b.id) })
	return list
}

// handleDeleteServer answers DELETE /servers/{id}: the server turns
// deleting and disappears when the delete_server action completes. A
// second delete while the first runs is refused with locked.
func handleDeleteServer(s *Server, r *request) (response, *apiError) {
	srv, err := s.serverFromPath(r)
	if err != nil {
		return response{}, err
	}
	if srv.status == statusDeleting {
		return response{}, newError("locked", "server %d is locked: it is being deleted", srv.id)
	}
	a := s.st.startDelete(srv, r.now)
	return ok200(schema.ServerDeleteResponse{Action: a.schema(r.now)}), nil
}

func (st *state) startDelete(srv *serverRec, now time.Time) *actionRec {
	prev := srv.status
	srv.status = statusDeleting
	a := st.startAction("delete_server", now, nil, ref("server", srv.id))
	a.onSuccess = func() { st.removeServer(srv.id) }
	a.onError = func() {
		if srv.status == statusDeleting {
			srv.status = prev
		}
	}
	return a
}

func (st *state) removeServer(id int64) {
	srv, ok := st.servers[id]
	if !ok {
		return
	}
	st.releasePrimaryIPs(srv)
	delete(st.servers, id)
	if st.serverNames[srv.name] == id {
		delete(st.serverNames, srv.name)
	}
}

// handleUpdateServer answers PUT /servers/{id} (name and labels).
func handleUpdateServer(s *Server, r *request) (response, *apiError) {
	srv, err := s.serverFromPath(r)
	if err != nil {
		return response{}, err
	}
	var req schema.ServerUpdateRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	var fe fieldErrors
	if req.Name != "" {
		if msg := validServerName(req.Name); msg != "" {
			fe.add("name", "%s", msg)
		}
	}
	if req.Labels != nil {
		for _, p := range validateLabels(*req.Labels) {
			fe.add("labels", "%s", p)
		}
	}
	if err := fe.err(); err != nil {
		return response{}, err
	}
	if req.Name != "" && req.Name != srv.name {
		if _, taken := s.st.serverNames[req.Name]; taken {
			return response{}, newError("uniqueness_error", "server name is already used")
		}
		delete(s.st.serverNames, srv.name)
		srv.name = req.Name
		s.st.serverNames[srv.name] = srv.id
	}
	if req.Labels != nil {
		srv.labels = maps.Clone(*req.Labels)
	}
	return ok200(map[string]any{"server": s.st.renderServer(srv)}), nil
}
