package hcloudtest

import (
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// state is the project as the API sees it. Every field is guarded by
// Server.mu.
type state struct {
	cfg *config

	ids    map[string]int64 // last ID handed out per resource kind
	now    time.Time        // the clock as of the last advance
	reqSeq uint64

	locations   []schema.Location
	serverTypes []schema.ServerType
	images      map[int64]*schema.Image

	servers     map[int64]*serverRec
	serverNames map[string]int64

	actions map[int64]*actionRec
	running []*actionRec // sorted by due, then ID

	networks        map[int64]*schema.Network
	firewalls       map[int64]*schema.Firewall
	sshKeys         map[int64]*schema.SSHKey
	placementGroups map[int64]*schema.PlacementGroup
	primaryIPs      map[int64]*primaryIPRec

	faults  faults
	limiter *rateLimiter
	log     []Request
	counts  map[string]int
}

// First IDs per kind, far apart so that an ID of the wrong kind never
// finds anything by accident.
var firstIDs = map[string]int64{
	"server":          100_000,
	"action":          1_000_000,
	"image":           300_000_000,
	"network":         10_000,
	"firewall":        20_000,
	"ssh_key":         30_000,
	"placement_group": 40_000,
	"primary_ip":      50_000,
}

func newState(cfg *config, now time.Time) state {
	st := state{
		cfg:             cfg,
		ids:             map[string]int64{},
		images:          map[int64]*schema.Image{},
		servers:         map[int64]*serverRec{},
		serverNames:     map[string]int64{},
		actions:         map[int64]*actionRec{},
		networks:        map[int64]*schema.Network{},
		firewalls:       map[int64]*schema.Firewall{},
		sshKeys:         map[int64]*schema.SSHKey{},
		placementGroups: map[int64]*schema.PlacementGroup{},
		primaryIPs:      map[int64]*primaryIPRec{},
		counts:          map[string]int{},
		faults:          faults{unavailable: map[unavailability]bool{}},
		limiter:         newRateLimiter(cfg.rateLimit, cfg.rateRefill, now),
	}
	for k, v := range firstIDs {
		st.ids[k] = v
	}
	st.locations = slices.Clone(catalogLocations)
	locs := map[string]schema.Location{}
	for _, l := range st.locations {
		locs[l.Name] = l
	}
	for _, t := range catalogTypes {
		st.serverTypes = append(st.serverTypes, newCatalogServerType(t, locs))
	}
	for _, ci := range catalogImages {
		created := ci.created
		name := ci.name
		osVersion := ci.osVersion
		st.images[ci.id] = &schema.Image{
			ID:           ci.id,
			Status:       "available",
			Type:         "system",
			Name:         &name,
			Description:  ci.description,
			DiskSize:     5,
			Created:      &created,
			OSFlavor:     ci.osFlavor,
			OSVersion:    &osVersion,
			Architecture: ci.architecture,
			RapidDeploy:  true,
			Labels:       map[string]string{},
		}
	}
	return st
}

func (st *state) nextID(kind string) int64 {
	st.ids[kind]++
	return st.ids[kind]
}

func (st *state) nextRequestSeq() uint64 {
	st.reqSeq++
	return st.reqSeq
}

func (st *state) locationByName(name string) *schema.Location {
	for i := range st.locations {
		if st.locations[i].Name == name {
			return &st.locations[i]
		}
	}
	return nil
}

func (st *state) locationByID(id int64) *schema.Location {
	for i := range st.locations {
		if st.locations[i].ID == id {
			return &st.locations[i]
		}
	}
	return nil
}

func (st *state) serverTypeByName(name string) *schema.ServerType {
	for i := range st.serverTypes {
		if st.serverTypes[i].Name == name {
			return &st.serverTypes[i]
		}
	}
	return nil
}

func (st *state) serverTypeByID(id int64) *schema.ServerType {
	for i := range st.serverTypes {
		if st.serverTypes[i].ID == id {
			return &st.serverTypes[i]
		}
	}
	return nil
}

// imageForArch finds an image by ID, or by name for an architecture as the
// API does when a server is created from an image name.
func (st *state) imageForArch(id int64, name, arch string) *schema.Image {
	if id != 0 {
		return st.images[id]
	}
	var found *schema.Image
	for _, img := range st.images {
		if img.Name != nil && *img.Name == name && img.Architecture == arch {
			if found == nil || img.ID > found.ID {
				found = img
			}
		}
	}
	return found
}
