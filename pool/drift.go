package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// UserDataHash is the value of [config.LabelUserDataHash] for user data:
// the first 32 hex digits (128 bits) of its SHA-256, which fit Hetzner's
// label values (at most 63 characters, alphanumeric) and tell nothing of
// the user data.
func UserDataHash(userData string) string {
	sum := sha256.Sum256([]byte(userData))
	return hex.EncodeToString(sum[:16])
}

// DriftReason names what differs between a server and its pool's current
// configuration.
type DriftReason string

// The drift reasons, in the order Drift reports them.
const (
	DriftServerType     DriftReason = "server_type"
	DriftLocation       DriftReason = "location"
	DriftImage          DriftReason = "image"
	DriftPlacementGroup DriftReason = "placement_group"
	DriftNetwork        DriftReason = "network"
	DriftFirewalls      DriftReason = "firewalls"
	DriftLabels         DriftReason = "labels"
	DriftUserData       DriftReason = "user_data"
	// DriftOffering: the server runs on a later offering of its pool
	// while an earlier one is available (see [Pool.EarlierAvailable]).
	// Reported only for a pool whose replace.drift lists it.
	DriftOffering DriftReason = config.DriftOffering
)

// Drift is a server of the pool built otherwise than its pool's current
// configuration would build it now.
type Drift struct {
	ServerID int64
	Name     string
	// Reasons says what differs, Details how (one per reason, in the
	// same order); nil when nothing is known to differ.
	Reasons []DriftReason
	Details []string
	// UserDataUnknown: the server has no LabelUserDataHash (created
	// before hcloudscale recorded it, or by another tool), so whether its
	// user data differs is unknown. It does not count as drift.
	UserDataUnknown bool
}

// Drifted reports whether something is known to differ.
func (d *Drift) Drifted() bool { return len(d.Reasons) > 0 }

func (d *Drift) add(r DriftReason, format string, args ...any) {
	d.Reasons = append(d.Reasons, r)
	d.Details = append(d.Details, fmt.Sprintf(format, args...))
}

// Drift compares each listed server of the pool that is not being deleted
// and not in a create flow (see creatingLocked) with what the pool's current settings would create: server type,
// location, image (as resolved now for the server's architecture),
// placement group, network, firewalls, the configured server labels and,
// by the hash recorded at create, the user data rendered for the server;
// and, for a pool whose replace.drift lists config.DriftOffering, whether
// an earlier offering of the pool than the server's is available now.
// It returns the servers with a difference or an unknown user data, by
// ID. Nothing is changed: replacing a server is the operator's call (drain
// the node, and the autoscaler deletes it and creates a new one when the
// pods need it).
//
// It answers from the last listing, the cached catalogue and the image
// resolver (one request per image spec when its cache has expired); an
// image that cannot be resolved leaves the image out and is returned as
// an error with the rest.
func (p *Pool) Drift(ctx context.Context) ([]Drift, error) {
	set := p.current()
	dc := &driftCheck{p: p, ctx: ctx, set: set, cfg: &set.cfg, images: map[config.Arch]int64{}}
	var out []Drift
	var earlier *Pool
	if r := set.cfg.Replace; r != nil && slices.Contains(r.Drift, config.DriftOffering) {
		earlier = p.EarlierAvailable()
	}
	for _, s := range p.driftCandidates(set) {
		d := Drift{ServerID: s.ID, Name: s.Name}
		if s.ServerType != dc.cfg.ServerType {
			d.add(DriftServerType, "server type %s, the pool's is %s", s.ServerType, dc.cfg.ServerType)
		}
		if s.Location != dc.cfg.Location {
			d.add(DriftLocation, "location %s, the pool's is %s", s.Location, dc.cfg.Location)
		}
		a := dc.arch(s.ServerType)
		dc.image(&d, s, a)
		dc.references(&d, s)
		dc.labels(&d, s)
		dc.userData(&d, s, a)
		if earlier != nil {
			ec := earlier.current().cfg
			d.add(DriftOffering, "offering %s in %s; the earlier offering %s in %s (node group %s) is available", s.ServerType, s.Location, ec.ServerType, ec.Location, earlier.Name())
		}
		if d.Drifted() || d.UserDataUnknown {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Drift) int { return int(a.ServerID - b.ServerID) })
	return out, errors.Join(dc.errs...)
}

// driftCandidates returns the listed servers of the pool that are neither
// being deleted nor in a create flow.
func (p *Pool) driftCandidates(set *settings) []*servercache.Server {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := p.viewLocked()
	if snap == nil {
		return nil
	}
	var servers []*servercache.Server
	for _, s := range p.members(snap) {
		if !p.deletingLocked(s) && !p.creatingLocked(set, s, now) {
			servers = append(servers, s)
		}
	}
	return servers
}

// driftCheck compares servers with one snapshot of a pool's settings,
// resolving each architecture's image and hashing a static cloud-init
// once.
type driftCheck struct {
	p          *Pool
	ctx        context.Context
	set        *settings
	cfg        *config.Pool
	images     map[config.Arch]int64 // resolved now, per architecture; 0: unresolved
	staticHash string                // of a cloudInit that is not a template, once known
	errs       []error
}

// arch returns the architecture of a server type, "" if unknown.
func (dc *driftCheck) arch(serverType string) config.Arch {
	st, err := dc.p.deps.Types.Lookup(dc.ctx, serverType)
	if err != nil || st == nil {
		return ""
	}
	return st.Arch
}

// image compares the server's image with the pool's, as resolved now for
// the server's architecture a.
func (dc *driftCheck) image(d *Drift, s *servercache.Server, a config.Arch) {
	if a == "" || s.ImageID == 0 {
		return
	}
	want, ok := dc.images[a]
	if !ok {
		img, err := dc.p.deps.Images.ResolvePool(dc.ctx, dc.cfg, a)
		if err != nil {
			dc.errs = append(dc.errs, fmt.Errorf("pool %q: image for %s: %w", dc.p.cfg.Name, a, err))
		} else {
			want = img.ID
		}
		dc.images[a] = want
	}
	if want != 0 && want != s.ImageID {
		d.add(DriftImage, "image %d, the pool's %s is now %d", s.ImageID, dc.cfg.Images.ForArch(a), want)
	}
}

// references compares the server's placement group, networks and
// firewalls with the pool's.
func (dc *driftCheck) references(d *Drift, s *servercache.Server) {
	refs := dc.set.refs
	if dc.set.cfg.SpreadGroups {
		if s.PlacementGroupID == 0 {
			d.add(DriftPlacementGroup, "in no placement group, the pool's servers go into its spread groups")
		}
	} else if want := idOf(refs.PlacementGroup); s.PlacementGroupID != want {
		d.add(DriftPlacementGroup, "placement group %d, the pool's is %d (0: none)", s.PlacementGroupID, want)
	}
	var wantNets []int64
	if refs.Network != nil {
		wantNets = []int64{refs.Network.ID}
	}
	if !sameIDs(s.NetworkIDs, wantNets) {
		d.add(DriftNetwork, "networks %v, the pool's %v", sorted(s.NetworkIDs), wantNets)
	}
	var wantFWs []int64
	for _, fw := range refs.Firewalls {
		wantFWs = append(wantFWs, fw.ID)
	}
	if !sameIDs(s.FirewallIDs, wantFWs) {
		d.add(DriftFirewalls, "firewalls %v, the pool's %v", sorted(s.FirewallIDs), sorted(wantFWs))
	}
}

// labels compares the server's labels with the pool's server labels.
func (dc *driftCheck) labels(d *Drift, s *servercache.Server) {
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(dc.cfg.ServerLabels)) {
		if got, ok := s.Labels[k]; !ok || got != dc.cfg.ServerLabels[k] {
			labels = append(labels, fmt.Sprintf("%s=%q (the pool's %q)", k, got, dc.cfg.ServerLabels[k]))
		}
	}
	if len(labels) > 0 {
		d.add(DriftLabels, "labels %s", strings.Join(labels, ", "))
	}
}

// userData compares the hash of the user data the server was created
// with, recorded in its label, with the pool's cloud-init as rendered for
// the server; a server without the label has an unknown user data.
func (dc *driftCheck) userData(d *Drift, s *servercache.Server, a config.Arch) {
	switch got := s.Labels[config.LabelUserDataHash]; {
	case got == "":
		d.UserDataUnknown = true
	case dc.set.cloudInit == nil:
		// Sent as written: one hash for every server.
		if dc.staticHash == "" {
			dc.staticHash = UserDataHash(dc.cfg.CloudInit.Reveal())
		}
		if dc.staticHash != got {
			d.add(DriftUserData, "user data differs from the pool's cloud-init")
		}
	case a != "":
		userData, err := dc.p.userData(dc.set, s.Name, a)
		if err == nil && UserDataHash(userData) != got {
			d.add(DriftUserData, "user data differs from the pool's cloud-init as rendered for the server")
		}
	}
}

// creatingLocked reports a server in a create flow: one a claim of this
// pool owns (a create or resumed flow runs on it), one still
// initializing, or, in a pool that creates its servers stopped, one that
// is off, on no network and younger than the creation timeout (another
// process's flow between its create and its attach: a standby replica or
// the status command sees the leader's flows so). Such a server is not
// built yet, so it is no drift. p.mu must be held.
func (p *Pool) creatingLocked(set *settings, s *servercache.Server, now time.Time) bool {
	if c, owned := p.claims[s.Name]; owned && c.phase == claimCreating {
		return true
	}
	switch {
	case s.Status == hcloud.ServerStatusInitializing:
		return true
	case set.stoppedCreates && s.Status == hcloud.ServerStatusOff && len(s.NetworkIDs) == 0:
		return s.Created.IsZero() || now.Sub(s.Created) <= p.opts.creationTimeout
	}
	return false
}

func idOf(pg *hcloud.PlacementGroup) int64 {
	if pg == nil {
		return 0
	}
	return pg.ID
}

func sorted(ids []int64) []int64 { return slices.Sorted(slices.Values(ids)) }

func sameIDs(a, b []int64) bool { return slices.Equal(sorted(a), sorted(b)) }
