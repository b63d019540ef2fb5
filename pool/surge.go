package pool

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Surge asks for one replacement server for the server with ID replaces,
// for a node lifecycle that replaces nodes surge-first: create the
// replacement, wait for its node, drain the old node, then delete the old
// server through the pool (DeleteInstances). It returns the server name
// of the claim, which is also the name of the replacement's node.
//
// It records one claim as [Pool.IncreaseSize] does, after the same
// refusals, in the same order: a removed pool ([ErrRemoved]), a
// remembered capacity error of the offering ([ErrOfferingUnavailable]),
// a failed first listing, a closed pool ([ErrClosed]). Only the bound
// differs: the target plus the deletes in flight plus the new claim may
// reach max size + maxSurge, so a pool at its max can still replace a
// node (maxSurge 0: it cannot). A surge over the bound fails with
// [ErrAboveMax]. The claim counts in TargetSize and appears in Instances
// at once, with [Instance.Replaces] set; its server is created with the
// pool's labels plus config.LabelReplaces=<replaces>, which the create
// request carries through its retries and an adoption after a lost
// response, so that the server keeps telling which server it replaces
// after it runs, after a restart and to a standby replica.
//
// Surge is idempotent per replaced server: when the pool, or another node
// group of its family (another offering of the pool), already has a
// claim (pending, creating, or the placeholder of a failed one) or a
// listed server that replaces the same server and is not being deleted,
// it records nothing and returns that claim's or server's name and nil,
// even when the bound would refuse a new claim. A lifecycle that lost
// track (a timeout, a restart) calls Surge again and finds its
// replacement. A failed placeholder is returned too: the caller sees its
// error in Instances and deletes it (DeleteInstances with its claim ID)
// before surging again. The refusals above come first: they hold for a
// repeated call as for a first one.
//
// In a pool of several offerings the replacement may be surged in another
// offering's group than the replaced server's (the drift reason
// config.DriftOffering moves a node back to an earlier offering): the
// bound counts the targets and deletes in flight of every group of the
// family, so the pool never has more than its max size + maxSurge servers
// across its offerings.
//
// replaces must be positive and maxSurge not negative, else Surge fails
// with [ErrInvalidDelta]. Whether replaces names a server of the pool is
// not checked: the old server may already be gone.
func (p *Pool) Surge(ctx context.Context, replaces int64, maxSurge int) (name string, err error) {
	if replaces <= 0 {
		return "", fmt.Errorf("pool %q: %w: surge must name the replaced server by its ID, got %d", p.cfg.Name, ErrInvalidDelta, replaces)
	}
	if maxSurge < 0 {
		return "", fmt.Errorf("pool %q: %w: max surge must not be negative, got %d", p.cfg.Name, ErrInvalidDelta, maxSurge)
	}
	unlock := p.lockFamily()
	defer unlock()
	otherT, otherD := p.others()
	elsewhere := p.othersReplacement(replaces)
	set, err := p.lockForClaims(ctx)
	if err != nil {
		return "", err
	}
	snap := p.viewLocked()
	if existing := cmp.Or(p.replacementLocked(snap, replaces), elsewhere); existing != "" {
		p.mu.Unlock()
		p.log.Debug("surge already requested", zap.Int64("replaces", replaces), zap.String("server", existing))
		return existing, nil
	}
	target := p.targetLocked(snap) + otherT
	deleting := p.deletesInFlightLocked(snap) + otherD
	if maxSize := set.cfg.MaxSize; target+deleting+1 > maxSize+maxSurge {
		p.mu.Unlock()
		if deleting > 0 {
			return "", fmt.Errorf("pool %q: %w: surge: target size %d + 1 exceeds max size %d + surge %d while %d deletes are in flight (a server counts until its delete action succeeds)",
				p.cfg.Name, ErrAboveMax, target, maxSize, maxSurge, deleting)
		}
		return "", fmt.Errorf("pool %q: %w: surge: target size %d + 1 exceeds max size %d + surge %d", p.cfg.Name, ErrAboveMax, target, maxSize, maxSurge)
	}
	c := p.recordClaimsLocked(set, 1, nil, replaces)[0]
	p.mu.Unlock()

	p.log.Info("surge requested", zap.Int64("replaces", replaces), zap.String("server", c.name), zap.Int("target", target+1))
	p.observe()
	return c.name, nil
}

// othersReplacement returns the name of a claim or listed server of
// another node group of p's family that replaces the server with ID
// replaces (see replacementLocked); "" when there is none. Call it with
// the family's lock held and without p.mu.
func (p *Pool) othersReplacement(replaces int64) string {
	if p.family == nil {
		return ""
	}
	for _, m := range *p.family.members.Load() {
		if m == p {
			continue
		}
		m.mu.Lock()
		name := m.replacementLocked(m.viewLocked(), replaces)
		m.mu.Unlock()
		if name != "" {
			return name
		}
	}
	return ""
}

// replacementLocked returns the name of the pool's claim or listed server
// that replaces the server with ID replaces and is not being deleted; ""
// when there is none. Claims come first (the oldest), then listed servers
// that no claim owns (the lowest ID). snap must come from viewLocked under
// the same hold of p.mu.
func (p *Pool) replacementLocked(snap *servercache.Snapshot, replaces int64) string {
	var found *claim
	for _, c := range p.claims {
		if c.cancelled || c.replaces != replaces {
			continue
		}
		if found == nil || cmp.Or(c.requested.Compare(found.requested), cmp.Compare(c.name, found.name)) < 0 {
			found = c
		}
	}
	if found != nil {
		return found.name
	}
	if snap == nil {
		return ""
	}
	for _, s := range p.members(snap) {
		if _, owned := p.claims[s.Name]; owned || p.deletingLocked(s) {
			continue // a claim's server is its claim's, judged above
		}
		if replacesOf(s.Labels) == replaces {
			return s.Name
		}
	}
	return ""
}

// replacesOf returns the server ID in a server's config.LabelReplaces
// label; 0 when the label is absent or not a positive decimal number in
// the form Surge writes it (no sign, no leading zeros).
func replacesOf(labels map[string]string) int64 {
	v, ok := labels[config.LabelReplaces]
	if !ok {
		return 0
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != v {
		return 0
	}
	return id
}

// Servers returns the pool's servers in the cache's current snapshot (the
// last listing, with the changes the pool's own flows made since), sorted
// by ID, without the servers being deleted: those we delete, those listed
// as deleting, and those of cancelled claims, whose flows delete them
// (Instances reports all of them Deleting). Servers in a create flow are
// included as listed. It answers from memory (no API call); nil before
// the first listing.
//
// The records are copies: their Labels, NetworkIDs and FirewallIDs are
// the caller's to keep or change, not the cache's.
func (p *Pool) Servers() []servercache.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := p.viewLocked()
	if snap == nil {
		return nil
	}
	var out []servercache.Server
	for _, s := range p.members(snap) {
		if p.deletingLocked(s) {
			continue
		}
		if c, owned := p.claims[s.Name]; owned && c.cancelled {
			continue
		}
		cp := *s
		cp.Labels = maps.Clone(s.Labels)
		cp.NetworkIDs = slices.Clone(s.NetworkIDs)
		cp.FirewallIDs = slices.Clone(s.FirewallIDs)
		out = append(out, cp)
	}
	// The snapshot keeps a pool's servers by ID already; sorting again
	// costs little and does not rely on it.
	slices.SortFunc(out, func(a, b servercache.Server) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
