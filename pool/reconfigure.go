package pool

import (
	"errors"
	"fmt"

	"github.com/hcloudscale/hcloudscale/cloudinit"
	"github.com/hcloudscale/hcloudscale/config"
)

// ErrRemoved is returned by IncreaseSize and AtomicIncreaseSize of a pool
// that [Pool.Remove] took out of the configuration: it only shrinks.
var ErrRemoved = errors.New("pool removed from the configuration: it only shrinks until its servers are gone")

// settings is what [Pool.Reconfigure] changes: the pool's configuration
// and what follows from it. A settings value is never modified once a
// pool holds it; a change publishes a new one. Every flow reads the
// settings once, when it starts, and keeps them to its end: a create that
// began stopped (a subnet range) is attached and powered on even if the
// range is removed meanwhile.
type settings struct {
	cfg config.Pool
	// refs holds the resolved references of cfg: Network, Firewalls,
	// SSHKeys and PlacementGroup. Its clients and caches are not read;
	// those of Pool.deps are.
	refs Deps
	// cloudInit is the parsed template when cfg.CloudInitTemplate is set.
	cloudInit *cloudinit.Template
	// stoppedCreates is true when servers are created stopped (a subnet
	// range is set) and attached and powered on afterwards.
	stoppedCreates bool
	// removed says the pool is no longer configured (Remove): min and max
	// size 0, no scale-up, deletes as usual.
	removed bool
}

// newSettings checks cfg and deps as New does and returns the settings of
// a pool.
func newSettings(cfg config.Pool, deps Deps, clusterName string) (*settings, []error) {
	errs := checkConfig(&cfg, clusterName)
	errs = append(errs, checkDeps(&cfg, &deps)...)
	cloudInit, err := parseCloudInit(&cfg)
	if err != nil {
		errs = append(errs, fmt.Errorf("pool %q: %w", cfg.Name, err))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &settings{cfg: cfg, refs: deps, cloudInit: cloudInit, stoppedCreates: cfg.SubnetIPRange.IsValid()}, nil
}

// current returns the pool's settings now. Read them once per decision:
// two reads may return different settings.
func (p *Pool) current() *settings { return p.set.Load() }

// Reconfigure replaces the pool's settings with cfg and the references
// resolved for it in deps (Network, Firewalls, SSHKeys, PlacementGroup;
// the shared clients and caches the pool was built with stay). It checks
// them as [New] does and changes nothing when they are wrong. It makes no
// API call.
//
// The new bounds apply to the next IncreaseSize and delete; the new
// server type, location, image, labels, cloud-init, network, firewalls and
// placement group apply to the servers of claims made from now on. Claims
// already made finish with the settings they were made under, and no
// server that exists is changed. A max size below the current target deletes
// nothing: the pool just cannot grow until it has shrunk below the max.
// A pool that was removed ([Pool.Remove]) is configured again.
func (p *Pool) Reconfigure(cfg config.Pool, deps Deps) error {
	if cfg.Name != p.cfg.Name {
		return fmt.Errorf("pool %q: reconfigure: the name cannot change, got %q", p.cfg.Name, cfg.Name)
	}
	s, errs := newSettings(cfg, deps, p.opts.clusterName)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("pool %q: %w", p.cfg.Name, ErrClosed)
	}
	p.set.Store(s)
	p.mu.Unlock()
	p.observe()
	return nil
}

// Remove takes the pool out of the configuration without deleting
// anything: its min and max size become 0, IncreaseSize fails with
// [ErrRemoved], and deletes work as before, so the autoscaler scales it
// down as its nodes become unneeded (min 0 allows every one of them).
// Claims already made go on. [Pool.Reconfigure] configures it again.
func (p *Pool) Remove() {
	p.mu.Lock()
	old := p.current()
	if old.removed || p.closed {
		p.mu.Unlock()
		return
	}
	s := *old
	s.removed = true
	p.set.Store(&s)
	p.mu.Unlock()
	p.observe()
	p.log.Info("pool removed from the configuration: no scale-up, it shrinks as its nodes become unneeded")
}

// Removed reports whether the pool was removed from the configuration.
func (p *Pool) Removed() bool { return p.current().removed }

// Empty reports whether the pool has no instance: no server, no claim,
// nothing being deleted, as of one instant.
func (p *Pool) Empty() bool {
	out, _ := p.view()
	return len(out) == 0
}

// bounds returns the min and max size of s: 0 and 0 once removed.
func (s *settings) bounds() (minSize, maxSize int) {
	if s.removed {
		return 0, 0
	}
	return s.cfg.MinSize, s.cfg.MaxSize
}

// trackBounds has the pool's metrics read its bounds at scrape time: the
// node group's as it reports them ([Pool.MinSize], [Pool.MaxSize]) and,
// for the first offering's group, the pool's configured bounds. The
// returned func stops it.
func (p *Pool) trackBounds() func() {
	untrackGroup := p.metrics.Bounds.TrackGroup(p.cfg.Name, p.familyBounds)
	if p.cfg.Name != p.current().cfg.FamilyName() {
		return untrackGroup
	}
	untrackPool := p.metrics.Bounds.TrackPool(p.cfg.Name, func() (int, int) { return p.current().bounds() })
	return func() { untrackGroup(); untrackPool() }
}
