package hcloudtest

import (
	"cmp"
	"crypto/md5" //nolint:gosec // SSH fingerprints are MD5 by definition
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// This file gives tests direct access to the project state, bypassing the
// API: to inspect what a client did, and to set up situations a client
// did not create (servers left by another tool or by a crash).

// ServerInfo is a snapshot of one server, including what the API does not
// return (user data, SSH keys).
type ServerInfo struct {
	ID             int64
	Name           string
	Status         hcloud.ServerStatus
	ServerType     string
	Location       string
	ImageID        int64
	Labels         map[string]string
	UserData       string
	SSHKeys        []int64
	Networks       []int64
	Firewalls      []int64
	PlacementGroup int64
	PublicIPv4     string
	PublicIPv6     string
	Created        time.Time
}

func (st *state) serverInfo(srv *serverRec) ServerInfo {
	info := ServerInfo{
		ID:             srv.id,
		Name:           srv.name,
		Status:         hcloud.ServerStatus(srv.status),
		ServerType:     st.serverTypeByID(srv.typeID).Name,
		Location:       st.locationByID(srv.locationID).Name,
		ImageID:        srv.imageID,
		Labels:         maps.Clone(srv.labels),
		UserData:       srv.userData,
		SSHKeys:        slices.Clone(srv.sshKeys),
		Firewalls:      slices.Clone(srv.firewalls),
		PlacementGroup: srv.placementGroup,
		PublicIPv4:     st.primaryIPAddress(srv.ipv4ID),
		PublicIPv6:     st.primaryIPAddress(srv.ipv6ID),
		Created:        srv.created,
	}
	for _, pn := range srv.privateNets {
		info.Networks = append(info.Networks, pn.Network)
	}
	return info
}

// Servers returns the servers whose labels match selector (label-selector
// syntax; "" selects all), in ID order, as of the clock's current time.
func (s *Server) Servers(selector string) ([]ServerInfo, error) {
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", selector, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	var out []ServerInfo
	for _, srv := range s.st.selectServers(sel, nil) {
		out = append(out, s.st.serverInfo(srv))
	}
	return out, nil
}

// ServerByID returns the server with id, if it exists.
func (s *Server) ServerByID(id int64) (ServerInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	srv, ok := s.st.servers[id]
	if !ok {
		return ServerInfo{}, false
	}
	return s.st.serverInfo(srv), true
}

// AddServer inserts a server without an API call and without actions, as
// if another tool had created it. Empty fields get defaults: status
// running, type cx23, location fsn1, the newest ubuntu-24.04 image of the
// type's architecture, name "server-<id>", created now. The name must be
// unique and every reference must exist; ID is ignored. The server limit
// and faults do not apply.
func (s *Server) AddServer(info ServerInfo) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.clock.Now()
	s.st.advance(now)
	stype, loc, err := s.st.checkAddServer(info)
	if err != nil {
		return 0, fmt.Errorf("add server: %w", err)
	}
	return s.st.insertServer(info, stype, loc, now)
}

// checkAddServer finds the server type and location AddServer defaults
// or was given, and reports every reference that does not exist and a
// name already used, at once.
func (st *state) checkAddServer(info ServerInfo) (*schema.ServerType, *schema.Location, error) {
	var errs []error
	typeName := cmp.Or(info.ServerType, "cx23")
	stype := st.serverTypeByName(typeName)
	if stype == nil {
		errs = append(errs, fmt.Errorf("server type %q does not exist", typeName))
	}
	locName := cmp.Or(info.Location, "fsn1")
	loc := st.locationByName(locName)
	if loc == nil {
		errs = append(errs, fmt.Errorf("location %q does not exist", locName))
	}
	if info.Name != "" {
		if _, taken := st.serverNames[info.Name]; taken {
			errs = append(errs, fmt.Errorf("server name %q is already used", info.Name))
		}
	}
	if info.ImageID != 0 && st.images[info.ImageID] == nil {
		errs = append(errs, fmt.Errorf("image %d does not exist", info.ImageID))
	}
	for _, n := range info.Networks {
		if st.networks[n] == nil {
			errs = append(errs, fmt.Errorf("network %d does not exist", n))
		}
	}
	for _, f := range info.Firewalls {
		if st.firewalls[f] == nil {
			errs = append(errs, fmt.Errorf("firewall %d does not exist", f))
		}
	}
	for _, k := range info.SSHKeys {
		if st.sshKeys[k] == nil {
			errs = append(errs, fmt.Errorf("ssh key %d does not exist", k))
		}
	}
	if info.PlacementGroup != 0 && st.placementGroups[info.PlacementGroup] == nil {
		errs = append(errs, fmt.Errorf("placement group %d does not exist", info.PlacementGroup))
	}
	return stype, loc, errors.Join(errs...)
}

// insertServer records a checked AddServer server with its defaults, its
// private IPs in its networks and both public IPs.
func (st *state) insertServer(info ServerInfo, stype *schema.ServerType, loc *schema.Location, now time.Time) (int64, error) {
	imageID := info.ImageID
	if imageID == 0 {
		imageID = st.imageForArch(0, "ubuntu-24.04", stype.Architecture).ID
	}
	srv := &serverRec{
		id:             st.nextID("server"),
		status:         string(info.Status),
		created:        info.Created,
		typeID:         stype.ID,
		locationID:     loc.ID,
		imageID:        imageID,
		labels:         maps.Clone(info.Labels),
		userData:       info.UserData,
		sshKeys:        slices.Clone(info.SSHKeys),
		firewalls:      slices.Clone(info.Firewalls),
		placementGroup: info.PlacementGroup,
	}
	srv.name = cmp.Or(info.Name, fmt.Sprintf("server-%d", srv.id))
	srv.status = cmp.Or(srv.status, statusRunning)
	if srv.created.IsZero() {
		srv.created = now
	}
	for _, n := range info.Networks {
		pn, apiErr := st.allocatePrivateIP(st.networks[n], loc.NetworkZone, "", "")
		if apiErr != nil {
			return 0, fmt.Errorf("add server: network %d: %s", n, apiErr.message)
		}
		srv.privateNets = append(srv.privateNets, pn)
	}
	st.createServerPrimaryIPs(srv, nil, srv.created)
	st.servers[srv.id] = srv
	st.serverNames[srv.name] = srv.id
	return srv.id, nil
}

// SetServerStatus sets a server's status directly, for situations the
// actions do not produce (e.g. "migrating", "unknown").
func (s *Server) SetServerStatus(id int64, status hcloud.ServerStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	srv, ok := s.st.servers[id]
	if !ok {
		return fmt.Errorf("server %d does not exist", id)
	}
	srv.status = string(status)
	return nil
}

// SetServerLabels replaces a server's labels directly.
func (s *Server) SetServerLabels(id int64, labels map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	srv, ok := s.st.servers[id]
	if !ok {
		return fmt.Errorf("server %d does not exist", id)
	}
	srv.labels = maps.Clone(labels)
	return nil
}

// DeleteServerNow removes a server at once, without an action, as if it
// had been deleted long ago by someone else. It reports whether the server
// existed.
func (s *Server) DeleteServerNow(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	_, ok := s.st.servers[id]
	s.st.removeServer(id)
	return ok
}

// Image describes an image for [Server.AddImage].
type Image struct {
	// Name is set for system and app images; snapshots usually have none.
	Name        string
	Description string
	// Type defaults to snapshot.
	Type hcloud.ImageType
	// Status defaults to available.
	Status hcloud.ImageStatus
	// Architecture defaults to x86.
	Architecture hcloud.Architecture
	Labels       map[string]string
	// Created defaults to the clock's now.
	Created time.Time
	// Deprecated, when set, hides the image from lists without
	// include_deprecated=true.
	Deprecated time.Time
	OSFlavor   string
	OSVersion  string
	// DiskSize in GB defaults to 5.
	DiskSize float32
}

// AddImage adds an image to the project and returns its ID.
func (s *Server) AddImage(img Image) (int64, error) {
	typ := cmp.Or(string(img.Type), string(hcloud.ImageTypeSnapshot))
	arch := cmp.Or(string(img.Architecture), string(hcloud.ArchitectureX86))
	var errs []error
	if !slices.Contains([]string{"system", "app", "snapshot", "backup", "temporary"}, typ) {
		errs = append(errs, fmt.Errorf("type %q is not one of system, app, snapshot, backup, temporary", typ))
	}
	if arch != "x86" && arch != "arm" {
		errs = append(errs, fmt.Errorf("architecture %q is not one of x86, arm", arch))
	}
	for _, p := range validateLabels(img.Labels) {
		errs = append(errs, errors.New(p))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("add image: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created := img.Created
	if created.IsZero() {
		created = s.cfg.clock.Now()
	}
	out := &schema.Image{
		ID:           s.st.nextID("image"),
		Status:       cmp.Or(string(img.Status), string(hcloud.ImageStatusAvailable)),
		Type:         typ,
		Description:  img.Description,
		DiskSize:     img.DiskSize,
		Created:      &created,
		OSFlavor:     cmp.Or(img.OSFlavor, "unknown"),
		Architecture: arch,
		Labels:       maps.Clone(img.Labels),
	}
	if out.DiskSize == 0 {
		out.DiskSize = 5
	}
	if img.Name != "" {
		name := img.Name
		out.Name = &name
	}
	if img.OSVersion != "" {
		v := img.OSVersion
		out.OSVersion = &v
	}
	if typ == "snapshot" {
		size := out.DiskSize / 3
		out.ImageSize = &size
	}
	if !img.Deprecated.IsZero() {
		d := img.Deprecated
		out.Deprecated = &d
		out.Deprecation = &schema.DeprecationInfo{Announced: d, UnavailableAfter: d.Add(90 * 24 * time.Hour)}
	}
	s.st.images[out.ID] = out
	return out.ID, nil
}

// AddSnapshot adds an available snapshot image of arch with labels,
// created now, and returns its ID.
func (s *Server) AddSnapshot(description string, arch hcloud.Architecture, labels map[string]string) (int64, error) {
	return s.AddImage(Image{Description: description, Architecture: arch, Labels: labels})
}

// SetImageStatus changes an image's status, e.g. a snapshot from creating
// to available.
func (s *Server) SetImageStatus(id int64, status hcloud.ImageStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, ok := s.st.images[id]
	if !ok {
		return fmt.Errorf("image %d does not exist", id)
	}
	img.Status = string(status)
	return nil
}

// DeleteImage removes an image at once, as when its owner deletes a
// snapshot; creates that name it then fail with invalid_input "image not
// found", as the API answers. It reports whether the image existed.
func (s *Server) DeleteImage(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.st.images[id]
	delete(s.st.images, id)
	return ok
}

// Network describes a network for [Server.AddNetwork].
type Network struct {
	Name    string
	IPRange string
	Subnets []Subnet
	Labels  map[string]string
}

// Subnet is one subnet of a [Network].
type Subnet struct {
	// IPRange is the subnet's CIDR, inside the network's IPRange.
	IPRange string
	// NetworkZone defaults to eu-central.
	NetworkZone string
	// Type defaults to cloud.
	Type string
}

// AddNetwork adds a network with its subnets and returns its ID. Names are
// unique.
func (s *Server) AddNetwork(n Network) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if n.Name == "" {
		errs = append(errs, errors.New("name is empty"))
	}
	for _, other := range s.st.networks {
		if other.Name == n.Name {
			errs = append(errs, fmt.Errorf("network name %q is already used", n.Name))
		}
	}
	netRange, err := parsePrefix(n.IPRange)
	if err != nil {
		errs = append(errs, fmt.Errorf("ip range: %w", err))
	}
	out := &schema.Network{
		ID:      0,
		Name:    n.Name,
		Created: s.cfg.clock.Now(),
		IPRange: n.IPRange,
		Subnets: []schema.NetworkSubnet{},
		Routes:  []schema.NetworkRoute{},
		Labels:  maps.Clone(n.Labels),
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for i, sn := range n.Subnets {
		p, err := parsePrefix(sn.IPRange)
		if err != nil {
			errs = append(errs, fmt.Errorf("subnets[%d].ip range: %w", i, err))
			continue
		}
		if netRange.IsValid() && (!netRange.Contains(p.Addr()) || p.Bits() < netRange.Bits()) {
			errs = append(errs, fmt.Errorf("subnets[%d].ip range %s is not inside %s", i, sn.IPRange, n.IPRange))
		}
		out.Subnets = append(out.Subnets, schema.NetworkSubnet{
			Type:        cmp.Or(sn.Type, "cloud"),
			IPRange:     p.String(),
			NetworkZone: cmp.Or(sn.NetworkZone, "eu-central"),
			Gateway:     netRange.Addr().Next().String(),
		})
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("add network: %w", err)
	}
	out.ID = s.st.nextID("network")
	s.st.networks[out.ID] = out
	return out.ID, nil
}

// Firewall describes a firewall for [Server.AddFirewall].
type Firewall struct {
	Name   string
	Labels map[string]string
}

// AddFirewall adds a firewall without rules and returns its ID. Names are
// unique.
func (s *Server) AddFirewall(f Firewall) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkNewName("firewall", f.Name, s.st.firewalls, func(o *schema.Firewall) string { return o.Name }); err != nil {
		return 0, err
	}
	out := &schema.Firewall{
		ID:        s.st.nextID("firewall"),
		Name:      f.Name,
		Labels:    nonNil(f.Labels),
		Created:   s.cfg.clock.Now(),
		Rules:     []schema.FirewallRule{},
		AppliedTo: []schema.FirewallResource{},
	}
	s.st.firewalls[out.ID] = out
	return out.ID, nil
}

// SSHKey describes an SSH key for [Server.AddSSHKey].
type SSHKey struct {
	Name string
	// PublicKey defaults to a fixed ed25519 key.
	PublicKey string
	Labels    map[string]string
}

const defaultPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnmOUuJWh2mfj1qCpjGBvG7Rsu4b3gEpMU0DDKTUQal hcloudtest"

// AddSSHKey adds an SSH key and returns its ID. Names and fingerprints are
// unique.
func (s *Server) AddSSHKey(k SSHKey) (int64, error) {
	if k.Name == "" {
		return 0, errors.New("add ssh key: name is empty")
	}
	pub := cmp.Or(k.PublicKey, defaultPublicKey)
	fp := fingerprint(pub)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, other := range s.st.sshKeys {
		if other.Name == k.Name {
			return 0, fmt.Errorf("add ssh key: name %q is already used", k.Name)
		}
		if other.Fingerprint == fp {
			return 0, fmt.Errorf("add ssh key: public key is already used by %q", other.Name)
		}
	}
	out := &schema.SSHKey{
		ID:          s.st.nextID("ssh_key"),
		Name:        k.Name,
		Fingerprint: fp,
		PublicKey:   pub,
		Labels:      nonNil(k.Labels),
		Created:     s.cfg.clock.Now(),
	}
	s.st.sshKeys[out.ID] = out
	return out.ID, nil
}

// fingerprint is the MD5 fingerprint the API shows for a public key.
func fingerprint(pub string) string {
	fields := strings.Fields(pub)
	data := []byte(pub)
	if len(fields) >= 2 {
		if raw, err := base64.StdEncoding.DecodeString(fields[1]); err == nil {
			data = raw
		}
	}
	sum := md5.Sum(data) //nolint:gosec // see import
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

// PlacementGroup describes a spread placement group for
// [Server.AddPlacementGroup].
type PlacementGroup struct {
	Name   string
	Labels map[string]string
}

// AddPlacementGroup adds a spread placement group and returns its ID.
// Names are unique.
func (s *Server) AddPlacementGroup(pg PlacementGroup) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkNewName("placement group", pg.Name, s.st.placementGroups, func(o *schema.PlacementGroup) string { return o.Name }); err != nil {
		return 0, err
	}
	out := &schema.PlacementGroup{
		ID:      s.st.nextID("placement_group"),
		Name:    pg.Name,
		Labels:  nonNil(pg.Labels),
		Created: s.cfg.clock.Now(),
		Servers: []int64{},
		Type:    "spread",
	}
	s.st.placementGroups[out.ID] = out
	return out.ID, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// SetServerTypeAvailable sets the per-location available flag of a server
// type in the catalogue. Creates of an unavailable type there fail with
// resource_unavailable, and GET /server_types shows the flag, unlike
// [Server.SetUnavailable], which the catalogue does not reveal.
func (s *Server) SetServerTypeAvailable(serverType, location string, available bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, err := s.st.serverTypeLocation(serverType, location)
	if err != nil {
		return err
	}
	at.Available = available
	at.Recommended = available
	return nil
}

// DeprecateServerType marks a server type deprecated in location: it is
// announced at announced, and from unavailableAfter on the location shows
// available false and creates there fail with invalid_server_type. Once
// the type is deprecated in every location, its top-level deprecated and
// deprecation are set too.
func (s *Server) DeprecateServerType(serverType, location string, announced, unavailableAfter time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, err := s.st.serverTypeLocation(serverType, location)
	if err != nil {
		return err
	}
	at.Deprecation = &schema.DeprecationInfo{Announced: announced, UnavailableAfter: unavailableAfter}
	at.Recommended = false
	return nil
}

func (st *state) serverTypeLocation(serverType, location string) (*schema.ServerTypeLocation, error) {
	t := st.serverTypeByName(serverType)
	if t == nil {
		return nil, fmt.Errorf("server type %q does not exist", serverType)
	}
	at := serverTypeAt(t, location)
	if at == nil {
		return nil, fmt.Errorf("server type %q is not offered in location %q", serverType, location)
	}
	return at, nil
}

// checkNewName reports an empty name, or one that a resource of the same
// kind already has: names are unique per kind.
func checkNewName[T any](kind, name string, existing map[int64]T, nameOf func(T) string) error {
	if name == "" {
		return fmt.Errorf("add %s: name is empty", kind)
	}
	for _, other := range existing {
		if nameOf(other) == name {
			return fmt.Errorf("add %s: name %q is already used", kind, name)
		}
	}
	return nil
}
