package pool

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/servercache"
)

// claimPhase is where a claim's create flow is.
type claimPhase int

const (
	// claimQueued: no create request has been sent, so no server can
	// exist; removing the claim leaves nothing behind.
	claimQueued claimPhase = iota
	// claimCreating: the create request was sent; a server exists or may
	// exist.
	claimCreating
	// claimFailed: the flow failed and cleaned up; the claim is a
	// placeholder that carries the error until it is deleted.
	claimFailed
)

// claim is one requested server, from IncreaseSize until its server runs
// (the claim is dropped then and the cached server counts instead) or
// until its placeholder is deleted.
type claim struct {
	name      string // the server name, chosen once: retries reuse it
	requested time.Time
	group     *atomicGroup // set for the claims of one AtomicIncreaseSize
	// replaces is the ID of the server that the claim's server replaces
	// (a claim made by Surge, or a resumed flow of a server labelled
	// config.LabelReplaces); 0 otherwise. The create request labels the
	// server with it, and every retry and adoption keeps that request.
	replaces int64
	done     chan struct{}
	// set holds the pool's settings when the claim was made (for a
	// resumed flow: when it was resumed); the flow uses them throughout.
	set *settings

	// The fields below are guarded by Pool.mu.
	phase claimPhase
	// sent is set once the create request is about to be sent: from then
	// on the server may exist.
	sent     bool
	serverID int64 // 0 until the create request returned a server
	status   hcloud.ServerStatus
	// cancelled is set when DeleteInstances or DecreaseTargetSize removed
	// the claim from the target; a flow still running deletes the server
	// it made, if any, and then drops the claim.
	cancelled bool
	cancel    context.CancelFunc // cancels the flow's waits; nil before it starts
	err       *ErrorInfo         // set in phase claimFailed
	result    error              // the flow's failure; read after done is closed
}

// newServerName returns "<pool>-<16 hex digits>". 64 random bits make a
// collision with any other name of the project practically impossible, so
// a uniqueness_error on a name we picked means our own earlier request
// created the server.
func newServerName(pool string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return pool + "-" + hex.EncodeToString(b[:])
}

// IncreaseSize asks for n more servers. It checks the bounds under the
// pool's lock (the max counts deletes in flight until their actions have
// succeeded: see the package documentation), records n claims and returns: the servers are created in the
// background, and the claims count in TargetSize and appear in Instances
// at once. It makes no API call (except a first server listing if the
// cache never had one).
//
// While a capacity error for the pool's offering is remembered, it fails
// at once with an error matching [ErrOfferingUnavailable] and records
// nothing: the autoscaler backs a group off at the first IncreaseSize
// error, which is the fastest way to make it try another pool.
func (p *Pool) IncreaseSize(ctx context.Context, n int) error {
	_, err := p.addClaims(ctx, n, nil)
	return err
}

// atomicGroup lets AtomicIncreaseSize stop waiting at the first failure.
type atomicGroup struct {
	failed chan struct{}
	once   sync.Once
}

func (g *atomicGroup) fail() {
	if g != nil {
		g.once.Do(func() { close(g.failed) })
	}
}

func (p *Pool) addClaims(ctx context.Context, n int, group *atomicGroup) ([]*claim, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pool %q: %w: size increase must be positive, got %d", p.cfg.Name, ErrInvalidDelta, n)
	}
	// The other offerings' share is read under the family's lock, held
	// until the claims are recorded, so that no other offering's claims
	// come in between.
	unlock := p.lockFamily()
	defer unlock()
	otherT, otherD := p.others()
	set, err := p.lockForClaims(ctx)
	if err != nil {
		return nil, err
	}
	snap := p.viewLocked()
	target := p.targetLocked(snap)
	if deleting := p.deletesInFlightLocked(snap) + otherD; otherT+target+deleting+n > set.cfg.MaxSize {
		p.mu.Unlock()
		return nil, aboveMax(p.cfg.Name, otherT+target, n, set.cfg.MaxSize, deleting, otherT)
	}
	claims := p.recordClaimsLocked(set, n, group, 0)
	p.mu.Unlock()

	p.log.Info("scale-up requested", zap.Int("delta", n), zap.Int("target", target+n))
	p.observe()
	return claims, nil
}

// aboveMax is the error of a scale-up past the max: target counts the
// pool's whole target, others of it in the other offerings' groups.
func aboveMax(pool string, target, n, maxSize, deleting, others int) error {
	msg := fmt.Sprintf("target size %d + %d exceeds max size %d", target, n, maxSize)
	if others > 0 {
		msg += fmt.Sprintf(" (%d of the target in the pool's other offerings)", others)
	}
	if deleting > 0 {
		msg += fmt.Sprintf(" while %d deletes are in flight (a server counts until its delete action succeeds)", deleting)
	}
	return fmt.Errorf("pool %q: %w: %s", pool, ErrAboveMax, msg)
}

// lockForClaims makes the checks that every new claim passes (IncreaseSize,
// AtomicIncreaseSize, Surge): the pool is not removed, no capacity error
// of its offering is remembered, there has been a listing, and the pool
// is not closed. On success it returns with p.mu held and the settings
// read under it, which the caller checks its bound against and records
// its claims with; on error p.mu is not held.
func (p *Pool) lockForClaims(ctx context.Context) (*settings, error) {
	if s := p.current(); s.removed {
		return nil, fmt.Errorf("pool %q: %w", p.cfg.Name, ErrRemoved)
	} else if e := p.offerings.check(s.cfg.ServerType, s.cfg.Location, placementKey(&s.cfg)); e != nil && p.opts.unavailableTTL > 0 {
		return nil, fmt.Errorf("pool %q: %w", p.cfg.Name, e)
	}
	if p.offerings.takeRefetchTypes() {
		// The catalogue said sold out when the mark was set; the creates
		// these claims start must see the catalogue as it is now.
		p.deps.Types.Invalidate()
	}
	if err := p.ensureListed(ctx); err != nil {
		return nil, err
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("pool %q: %w", p.cfg.Name, ErrClosed)
	}
	// The settings are read under p.mu, which Reconfigure holds to
	// publish new ones: the bound checked is the one the claims are made
	// under.
	set := p.current()
	if set.removed {
		p.mu.Unlock()
		return nil, fmt.Errorf("pool %q: %w", p.cfg.Name, ErrRemoved)
	}
	return set, nil
}

// recordClaimsLocked records n claims made under set and starts their
// create flows. replaces is the ID of the server the claims' servers
// replace (Surge; 0: none). p.mu must be held, and lockForClaims must
// have checked that the pool is not closed under the same hold.
func (p *Pool) recordClaimsLocked(set *settings, n int, group *atomicGroup, replaces int64) []*claim {
	now := p.now()
	claims := make([]*claim, 0, n)
	for range n {
		c := &claim{name: newServerName(set.cfg.FamilyName()), requested: now, group: group, done: make(chan struct{}), set: set, replaces: replaces}
		p.claims[c.name] = c
		claims = append(claims, c)
	}
	for _, c := range claims {
		// Cannot fail: closed was checked by lockForClaims, under the
		// same lock.
		p.startLocked(func(ctx context.Context) { p.runClaim(ctx, c) })
	}
	return claims
}

// DecreaseTargetSize lowers the target by up to -delta by removing claims
// that have no server: claims whose create request has not been sent yet
// (newest first), then placeholders of failed claims. It never drops the
// target below the servers that exist, whose deletion is DeleteInstances'
// job.
//
// If -delta exceeds what can be removed, it removes what it can and
// returns nil (logged at info). The autoscaler calls it to revert a
// timed-out scale-up, where removing the queued claims is what it wants,
// and from fixNodeGroupSize, where nil and an error both end the
// iteration and an error also fails its health check; the package
// documentation (Deleting and shrinking) explains why the pool reports
// its instances so that fixNodeGroupSize never needs more than this can
// remove. delta must be negative.
func (p *Pool) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("pool %q: %w: size decrease must be negative, got %d", p.cfg.Name, ErrInvalidDelta, delta)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pool %q: decrease target size: %w", p.cfg.Name, err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("pool %q: %w", p.cfg.Name, ErrClosed)
	}
	var queued, failed []*claim
	for _, c := range p.claims {
		switch {
		case c.cancelled:
		case c.phase == claimQueued:
			queued = append(queued, c)
		case c.phase == claimFailed:
			failed = append(failed, c)
		}
	}
	newestFirst := func(a, b *claim) int {
		return cmp.Or(b.requested.Compare(a.requested), cmp.Compare(a.name, b.name))
	}
	slices.SortFunc(queued, newestFirst)
	slices.SortFunc(failed, newestFirst)
	want := -delta
	removed := 0
	for _, c := range append(queued, failed...) {
		if removed == want {
			break
		}
		p.dropClaimLocked(c)
		removed++
	}
	target := p.targetLocked(p.viewLocked())
	p.mu.Unlock()

	if removed < want {
		p.log.Info("target size decrease clamped: the rest of the target is servers that exist or are being created",
			zap.Int("requested", want), zap.Int("removed", removed), zap.Int("target", target))
	} else {
		p.log.Info("target size decreased", zap.Int("removed", removed), zap.Int("target", target))
	}
	p.observe()
	return nil
}

// dropClaimLocked removes a claim that has no server from the pool: a
// queued claim's flow is cancelled before it sends anything, a
// placeholder just goes. p.mu must be held.
func (p *Pool) dropClaimLocked(c *claim) {
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
	delete(p.claims, c.name)
}

// cancelClaimLocked takes a claim whose create request was sent out of
// the target; its flow deletes the server once it exists and then drops
// the claim. p.mu must be held.
func (p *Pool) cancelClaimLocked(c *claim) {
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
}

// deletesInFlightLocked counts the servers that have left the target to
// be deleted but may still exist: servers being deleted (by us, until
// their delete action succeeds, or listed as deleting) and cancelled
// claims whose create was sent (their flow deletes the server). The max
// check counts them: a delete action that fails makes its server count
// again, and a slot it freed for a new claim would take the pool above
// max. snap must come from viewLocked under the same hold of p.mu.
func (p *Pool) deletesInFlightLocked(snap *servercache.Snapshot) int {
	n := 0
	if snap != nil {
		for _, s := range p.members(snap) {
			if _, owned := p.claims[s.Name]; !owned && p.deletingLocked(s) {
				n++
			}
		}
	}
	for _, c := range p.claims {
		if c.cancelled && c.phase == claimCreating {
			n++
		}
	}
	return n
}
