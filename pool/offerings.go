package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/hcloudscale/hcloudscale/internal/metrics"
)

// DefaultUnavailableTTL is how long a capacity error keeps an offering
// marked unavailable.
const DefaultUnavailableTTL = 5 * time.Minute

// ErrOfferingUnavailable matches (errors.Is) the error IncreaseSize (and Surge)
// returns while the pool's offering is remembered as unavailable.
var ErrOfferingUnavailable = errors.New("offering unavailable")

// UnavailableError is returned by IncreaseSize, without any API call and
// without recording claims, while a capacity error for the pool's server
// type in its location (or for its placement group) is remembered. It
// matches [ErrOfferingUnavailable].
type UnavailableError struct {
	ServerType string
	Location   string
	// PlacementGroup is set when the placement group, not the offering,
	// is full.
	PlacementGroup string
	Code           string // the Hetzner code of the failure
	Message        string
	Until          time.Time
}

func (e *UnavailableError) Error() string {
	what := fmt.Sprintf("server type %s in location %s", e.ServerType, e.Location)
	if e.PlacementGroup != "" {
		what = fmt.Sprintf("placement group %s", e.PlacementGroup)
	}
	return fmt.Sprintf("%s unavailable until %s after %s: %s",
		what, e.Until.UTC().Format(time.RFC3339), e.Code, e.Message)
}

// Is makes errors.Is(err, ErrOfferingUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrOfferingUnavailable }

type offeringKey struct {
	serverType, location, placementGroup string
}

// Offerings remembers offerings that failed with a capacity error. Pools
// that share one (see [WithOfferings]) stop asking for a sold-out server
// type in a location as soon as any of them hit the error. Its lock is
// held only for map operations, never during I/O, so sharing it does not
// serialise the pools. The zero value is not usable; use [NewOfferings].
type Offerings struct {
	clock   clock.Clock
	metrics *metrics.Set

	mu      sync.Mutex // guards entries and refetchTypes
	entries map[offeringKey]*UnavailableError
	// refetchTypes is set when a mark that came from the server-type
	// catalogue (CodeServerTypeUnavailable) expires: the catalogue in
	// memory still says unavailable, so the next scale-up must fetch it
	// again or the pool would stay sold out until the catalogue's TTL.
	refetchTypes bool
}

// NewOfferings returns an empty registry that reads time from clock (the
// wall clock when nil) and registers its gauge of unavailable offerings
// with reg (register-or-reuse, as [WithRegisterer]; nowhere when nil). The
// error is a registration conflict on reg.
func NewOfferings(c clock.Clock, reg prometheus.Registerer) (*Offerings, error) {
	m, err := metrics.New(reg)
	if err != nil {
		return nil, fmt.Errorf("offerings: %w", err)
	}
	return newOfferings(c, m), nil
}

// newOfferings is NewOfferings reporting to m, a pool's own metrics.
func newOfferings(c clock.Clock, m *metrics.Set) *Offerings {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Offerings{clock: c, metrics: m, entries: make(map[offeringKey]*UnavailableError)}
}

// MarkUnavailable remembers an unavailable offering until now+ttl, as a
// capacity error at runtime does; a later mark of the same key extends it.
// A Cluster marks the offerings the catalogue shows as sold out when it
// starts, so that their pools fail fast instead of the Cluster not
// starting. When a mark with Code [CodeServerTypeUnavailable] expires, the
// next scale-up of a pool that shares this registry fetches the catalogue
// again, so the pool works as soon as Hetzner offers the type again.
func (o *Offerings) MarkUnavailable(e UnavailableError, ttl time.Duration) *UnavailableError {
	return o.mark(e, ttl)
}

// mark remembers an unavailable offering until now+ttl; a later mark of the
// same key extends it.
func (o *Offerings) mark(e UnavailableError, ttl time.Duration) *UnavailableError {
	e.Until = o.clock.Now().Add(ttl)
	k := offeringKey{e.ServerType, e.Location, e.PlacementGroup}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entries[k] = &e
	o.metrics.UnavailableOfferings.WithLabelValues(e.ServerType, e.Location).Set(1)
	return &e
}

// check returns the remembered error for the offering or its placement
// group, nil when both are available.
func (o *Offerings) check(serverType, location, placementGroup string) *UnavailableError {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	o.expireLocked(now)
	if e := o.entries[offeringKey{serverType, location, ""}]; e != nil {
		return e
	}
	if placementGroup != "" {
		if e := o.entries[offeringKey{serverType, location, placementGroup}]; e != nil {
			return e
		}
	}
	return nil
}

// takeRefetchTypes reports, once, that a mark from the catalogue expired
// since the last call.
func (o *Offerings) takeRefetchTypes() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.refetchTypes
	o.refetchTypes = false
	return t
}

// list returns the offerings currently remembered as unavailable, ordered
// by server type, location and placement group.
func (o *Offerings) list() []UnavailableError {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expireLocked(o.clock.Now())
	out := make([]UnavailableError, 0, len(o.entries))
	for _, e := range o.entries {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b UnavailableError) int {
		return cmp.Or(cmp.Compare(a.ServerType, b.ServerType), cmp.Compare(a.Location, b.Location),
			cmp.Compare(a.PlacementGroup, b.PlacementGroup))
	})
	return out
}

func (o *Offerings) expireLocked(now time.Time) {
	for k, e := range o.entries {
		if now.Before(e.Until) {
			continue
		}
		delete(o.entries, k)
		if e.Code == CodeServerTypeUnavailable {
			o.refetchTypes = true
		}
		still := false
		for k2 := range o.entries {
			if k2.serverType == k.serverType && k2.location == k.location {
				still = true
				break
			}
		}
		if !still {
			o.metrics.UnavailableOfferings.DeleteLabelValues(k.serverType, k.location)
		}
	}
}
