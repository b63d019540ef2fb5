package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// MaxSpreadMembers is how many servers a spread placement group holds.
const MaxSpreadMembers = 10

// DefaultSpreadGrace is how long a spread group the pool created stays
// empty before the pool deletes it.
const DefaultSpreadGrace = 10 * time.Minute

// CodePlacementGroupLimit is the ErrorInfo code of a claim that needed a
// new spread group when the project already held as many placement groups
// as Hetzner allows.
const CodePlacementGroupLimit = "placement_group_limit"

// ErrPlacementGroupLimit matches (errors.Is) the failure of a claim that
// needed a new spread group while the project is at Hetzner's limit of
// placement groups.
var ErrPlacementGroupLimit = errors.New("placement group limit of the project reached")

// PlacementGroupAPI is what spread groups need of hcloud-go; *hcloud.PlacementGroupClient has it.
type PlacementGroupAPI interface {
	AllWithOpts(ctx context.Context, opts hcloud.PlacementGroupListOpts) ([]*hcloud.PlacementGroup, error)
	Create(ctx context.Context, opts hcloud.PlacementGroupCreateOpts) (hcloud.PlacementGroupCreateResult, *hcloud.Response, error)
	Delete(ctx context.Context, pg *hcloud.PlacementGroup) (*hcloud.Response, error)
}

var _ PlacementGroupAPI = (*hcloud.PlacementGroupClient)(nil)

// spreadGroups are the spread placement groups a pool with
// config.Pool.SpreadGroups creates and owns: labelled
// config.LabelSpreadPool=<pool> (and the cluster label), found again by
// that label after a restart, never another group.
//
// The invariant: a group never gets an eleventh server. A group's fill is
// the pool's listed servers in it plus the reservations not yet listed;
// a claim reserves its slot under mu before its create request is sent,
// and the reservation stays until a listing shows the server or a
// listing that began after the flow ended does not (the server is gone).
type spreadGroups struct {
	pool   string
	labels map[string]string
	api    PlacementGroupAPI
	cache  *servercache.Cache
	clock  clock.PassiveClock
	grace  time.Duration
	log    *zap.Logger
	limit  func() // counts a refusal for the project's group limit

	mu       sync.Mutex // guards every field below
	loaded   bool       // groups were listed once
	groups   map[int64]*spreadGroup
	reserved map[string]*reservation // by server name
	// growing is closed when the listing or creation in flight ends; nil
	// when none is.
	growing  chan struct{}
	sweeping bool
	// taken are the names of groups that are not the pool's (another
	// label) and that the pool's own groups must therefore avoid.
	taken map[string]bool
}

type spreadGroup struct {
	pg         *hcloud.PlacementGroup
	emptySince time.Time // zero while not known to be empty
	deleting   bool
	// full says the last listing showed the group with as many members
	// as it holds (servers that are not the pool's count there too).
	full bool
}

type reservation struct {
	group  int64
	doneAt time.Time // when the claim's flow ended; zero while it runs
}

// fillLocked counts each group's servers: the listed servers of the pool
// in it and the reservations the listing does not show yet. It drops the
// reservations the listing now answers for.
func (s *spreadGroups) fillLocked() map[int64]int {
	fill := make(map[int64]int, len(s.groups))
	listed := map[string]bool{}
	snap := s.cache.Current()
	if snap != nil {
		for _, srv := range snap.Pool(s.pool) {
			if _, ok := s.groups[srv.PlacementGroupID]; ok {
				fill[srv.PlacementGroupID]++
			}
			listed[srv.Name] = true
		}
	}
	for name, r := range s.reserved {
		ended := !r.doneAt.IsZero()
		if ended && snap != nil && (listed[name] || snap.FetchedAt().After(r.doneAt)) {
			delete(s.reserved, name)
			continue
		}
		if !listed[name] {
			fill[r.group]++
		}
	}
	return fill
}

// roomLocked returns the fullest group with room, so that servers gather
// in few groups and the others can empty; the oldest on a tie.
func (s *spreadGroups) roomLocked(fill map[int64]int) *spreadGroup {
	var best *spreadGroup
	for _, g := range s.groups {
		n := fill[g.pg.ID]
		if g.deleting || g.full || n >= MaxSpreadMembers {
			continue
		}
		if best == nil || n > fill[best.pg.ID] || n == fill[best.pg.ID] && g.pg.ID < best.pg.ID {
			best = g
		}
	}
	return best
}

// reserve takes a slot for the server name in a group with room, creating
// the next group when every one is full. Concurrent callers share one
// listing or creation.
func (s *spreadGroups) reserve(ctx context.Context, name string) (*hcloud.PlacementGroup, error) {
	for {
		s.mu.Lock()
		if s.loaded {
			if g := s.roomLocked(s.fillLocked()); g != nil {
				s.reserved[name] = &reservation{group: g.pg.ID}
				g.emptySince = time.Time{}
				s.mu.Unlock()
				return g.pg, nil
			}
		}
		if wait := s.growing; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		s.growing = done
		loaded := s.loaded
		s.mu.Unlock()
		var err error
		if loaded {
			err = s.create(ctx)
		} else {
			err = s.load(ctx)
		}
		s.mu.Lock()
		s.growing = nil
		close(done)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// done ends the reservation of name: sent says a create request was sent,
// so the server may exist and the slot stays until a listing tells.
func (s *spreadGroups) done(name string, sent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserved[name]
	switch {
	case r == nil:
	case !sent:
		delete(s.reserved, name)
	default:
		r.doneAt = s.clock.Now()
	}
}

// load lists the pool's groups by their labels.
func (s *spreadGroups) load(ctx context.Context) error {
	all, err := s.api.AllWithOpts(ctx, hcloud.PlacementGroupListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: selectorOf(s.labels)},
		Type:     hcloud.PlacementGroupTypeSpread,
	})
	if err != nil {
		return fmt.Errorf("listing the spread placement groups of pool %q: %w", s.pool, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[int64]bool, len(all))
	for _, pg := range all {
		seen[pg.ID] = true
		full := len(pg.Servers) >= MaxSpreadMembers
		if g, ok := s.groups[pg.ID]; ok {
			g.pg, g.full = pg, full
			continue
		}
		s.groups[pg.ID] = &spreadGroup{pg: pg, full: full}
	}
	for id, g := range s.groups {
		if !seen[id] && !g.deleting {
			delete(s.groups, id)
		}
	}
	s.loaded = true
	return nil
}

// create makes the next group, named <pool>-spread-<n> with the lowest n
// free. A name already taken is a group an earlier answer did not reach
// us, or one that is not the pool's: the groups are listed again, and a
// name the listing does not show is avoided from then on.
func (s *spreadGroups) create(ctx context.Context) error {
	s.mu.Lock()
	names := make([]string, 0, len(s.groups)+len(s.taken))
	for _, g := range s.groups {
		names = append(names, g.pg.Name)
	}
	for n := range s.taken {
		names = append(names, n)
	}
	s.mu.Unlock()
	name := ""
	for n := 1; name == ""; n++ {
		if c := s.pool + "-spread-" + strconv.Itoa(n); !slices.Contains(names, c) {
			name = c
		}
	}
	res, _, err := s.api.Create(ctx, hcloud.PlacementGroupCreateOpts{Name: name, Labels: s.labels, Type: hcloud.PlacementGroupTypeSpread})
	switch {
	case err == nil:
		s.mu.Lock()
		s.groups[res.PlacementGroup.ID] = &spreadGroup{pg: res.PlacementGroup}
		s.mu.Unlock()
		s.log.Info("spread placement group created", zap.String("placement_group", name), zap.Int64("id", res.PlacementGroup.ID))
		return nil
	case hcloud.IsError(err, hcloud.ErrorCodeUniquenessError):
		return s.loadAfterConflict(ctx, name)
	case hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded):
		s.limit()
		return &limitError{&infoError{ErrorInfo{
			Class: OutOfResources, Code: CodePlacementGroupLimit,
			Message: fmt.Sprintf("every spread placement group of the pool is full and the project holds as many placement groups as Hetzner allows: %v", err),
		}}}
	}
	return fmt.Errorf("creating spread placement group %s: %w", name, err)
}

// loadAfterConflict lists the groups again after the name was refused as
// taken; a name none of the pool's groups has belongs to another group and
// is avoided.
func (s *spreadGroups) loadAfterConflict(ctx context.Context, name string) error {
	if err := s.load(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		if g.pg.Name == name {
			return nil
		}
	}
	s.taken[name] = true
	s.log.Warn("a placement group that is not the pool's has the name of its next spread group; the name is skipped", zap.String("placement_group", name))
	return nil
}

// limitError is the infoError of a claim refused for the project's
// placement group limit; it matches ErrPlacementGroupLimit.
type limitError struct{ info *infoError }

func (e *limitError) Error() string        { return e.info.Error() }
func (e *limitError) Unwrap() error        { return e.info }
func (e *limitError) Is(target error) bool { return target == ErrPlacementGroupLimit }

// sweep deletes the groups that have been empty, with no slot reserved,
// for the grace period. A group Hetzner refuses to delete (a server is in
// it after all) is kept.
func (s *spreadGroups) sweep(ctx context.Context) {
	s.mu.Lock()
	if s.sweeping || s.growing != nil {
		s.mu.Unlock()
		return
	}
	s.sweeping = true
	now := s.clock.Now()
	var victims []*spreadGroup
	if s.loaded {
		fill := s.fillLocked()
		for _, g := range s.groups {
			switch {
			case g.deleting:
			case fill[g.pg.ID] > 0:
				g.emptySince = time.Time{}
			case g.emptySince.IsZero():
				g.emptySince = now
			case now.Sub(g.emptySince) >= s.grace:
				g.deleting = true
				victims = append(victims, g)
			}
		}
	}
	loaded := s.loaded
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.sweeping = false
		s.mu.Unlock()
	}()
	if !loaded {
		if err := s.load(ctx); err != nil {
			s.log.Warn("listing spread placement groups failed", zap.Error(err))
		}
		return
	}
	for _, g := range victims {
		s.remove(ctx, g)
	}
}

// remove deletes an empty group.
func (s *spreadGroups) remove(ctx context.Context, g *spreadGroup) {
	_, err := s.api.Delete(ctx, g.pg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil || hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		delete(s.groups, g.pg.ID)
		s.log.Info("empty spread placement group deleted", zap.String("placement_group", g.pg.Name))
		return
	}
	g.deleting, g.emptySince = false, time.Time{}
	s.log.Warn("deleting an empty spread placement group failed; it is kept", zap.String("placement_group", g.pg.Name), zap.Error(err))
}

// selectorOf writes labels as a label selector, keys sorted.
func selectorOf(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sel := ""
	for i, k := range keys {
		if i > 0 {
			sel += ","
		}
		sel += k + "=" + labels[k]
	}
	return sel
}

// spreadLabels are the labels of the pool's spread groups.
func spreadLabels(pool, cluster string) map[string]string {
	l := map[string]string{config.LabelSpreadPool: pool}
	if cluster != "" {
		l[config.LabelCluster] = cluster
	}
	return l
}

// spreadKey stands for all spread groups of a pool where the offerings
// registry keys a placement group: a pool at the project's group limit
// fails fast as one with a full fixed group does.
func spreadKey(pool string) string { return pool + "-spread-*" }

// placementKey is the placement group a pool's scale-ups depend on, as the
// offerings registry keys it; "" for none.
func placementKey(cfg *config.Pool) string {
	if cfg.SpreadGroups {
		return spreadKey(cfg.Name)
	}
	return cfg.PlacementGroup
}

// reserveSpread gives opts a spread group with room for the claim's server
// when the claim's settings have SpreadGroups.
func (p *Pool) reserveSpread(ctx context.Context, c *claim, opts *hcloud.ServerCreateOpts) error {
	if !c.set.cfg.SpreadGroups {
		return nil
	}
	pg, err := p.spread.reserve(ctx, c.name)
	if err != nil {
		return err
	}
	opts.PlacementGroup = pg
	return nil
}

// spreadRefused lists the spread groups again before the next
// reservation when Hetzner refused a create for its group: the group was
// deleted by hand (invalid input, not found) or holds servers the pool
// does not count (member limit).
func (p *Pool) spreadRefused(c *claim, err error) {
	if c.set.cfg.SpreadGroups && (hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) ||
		hcloud.IsError(err, hcloud.ErrorCodeNotFound) || hcloud.IsError(err, errorCodePlacementGroupMemberLimitReached)) {
		p.spread.mu.Lock()
		p.spread.loaded = false
		p.spread.mu.Unlock()
	}
}

// endSpread ends the claim's reservation, if any, when its flow ends.
func (p *Pool) endSpread(c *claim) {
	p.mu.Lock()
	sent := c.sent
	p.mu.Unlock()
	p.spread.done(c.name, sent)
}

// SweepSpreadGroups starts, in the background, the deletion of the pool's
// spread groups that have stayed empty for the grace period (and, after
// a start, the listing that finds them). Cluster.Refresh calls it; it
// sends nothing for a pool that neither has SpreadGroups nor groups left
// from when it had.
func (p *Pool) SweepSpreadGroups() {
	if !p.current().cfg.SpreadGroups && !p.spread.hasGroups() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startLocked(p.spread.sweep)
}

// SpreadGroup is one spread placement group of a pool and its fill.
type SpreadGroup struct {
	ID      int64
	Name    string
	Servers int // listed servers of the pool in it plus reserved slots
}

// SpreadGroups returns the pool's spread groups known since the last
// listing of them, by ID.
func (p *Pool) SpreadGroups() []SpreadGroup {
	s := p.spread
	s.mu.Lock()
	defer s.mu.Unlock()
	fill := s.fillLocked()
	out := make([]SpreadGroup, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, SpreadGroup{ID: g.pg.ID, Name: g.pg.Name, Servers: fill[g.pg.ID]})
	}
	slices.SortFunc(out, func(a, b SpreadGroup) int { return int(a.ID - b.ID) })
	return out
}

func (s *spreadGroups) hasGroups() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups) > 0
}

// LoadSpreadGroups lists the pool's spread groups now, unless they were
// listed before or the pool has no SpreadGroups: for a caller that reads
// [Pool.SpreadGroups] right after a start, such as the status command.
func (p *Pool) LoadSpreadGroups(ctx context.Context) error {
	s := p.spread
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded || !p.current().cfg.SpreadGroups {
		return nil
	}
	return s.load(ctx)
}
