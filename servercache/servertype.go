package servercache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/config"
)

// ServerType is the compact record of one server type: what a node
// template and a price need.
type ServerType struct {
	ID          int64
	Name        string
	Description string
	Category    string
	Cores       int
	MemoryGB    float64
	DiskGB      int
	// Arch is config.ArchAMD64 for Hetzner's "x86", config.ArchARM64 for
	// "arm", and empty for an architecture this version does not know.
	Arch        config.Arch
	CPUType     string
	StorageType string
	// Locations holds one entry per location name that the type lists or
	// has a price for.
	Locations map[string]TypeLocation
}

// TypeLocation is a server type's availability and price in one location.
type TypeLocation struct {
	// Available is whether servers of the type can be ordered there now;
	// a price alone does not make a type available.
	Available   bool
	Recommended bool
	Deprecated  bool
	// UnavailableAfter is when a deprecated type stops being offered
	// there; zero when not deprecated.
	UnavailableAfter time.Time
	// The prices, parsed from the API's decimal strings, in the project's
	// currency; meaningful only when HasPrice.
	PriceHourlyNet   float64
	PriceHourlyGross float64
	PriceMonthlyNet  float64
	HasPrice         bool
}

// ServerTypeLister is the part of hcloud.ServerTypeClient that a
// [TypeCatalog] uses.
type ServerTypeLister interface {
	All(ctx context.Context) ([]*hcloud.ServerType, error)
}

var _ ServerTypeLister = (*hcloud.ServerTypeClient)(nil)

// TypeCatalog caches the server-type catalogue like a [Cache] caches
// servers: a TTL (DefaultTypeTTL) with jitter, coalesced fetches, callers
// that stop waiting when their ctx ends. Unlike a Cache it prefers a stale
// catalogue to an error (see "Stale but good" in the package
// documentation). Its methods are safe for concurrent use.
type TypeCatalog struct {
	client   ServerTypeLister
	log      *zap.Logger
	refresh  *refresher
	maxStale time.Duration
	types    atomic.Pointer[typeSet]
}

type typeSet struct {
	list   []*ServerType // in API order
	byName map[string]*ServerType
}

// NewTypeCatalog returns a TypeCatalog that lists with client, which is
// usually (*hcloud.Client).ServerType. It does no I/O. WithClusterName
// does not apply to it, nor does the listing budget.
func NewTypeCatalog(client ServerTypeLister, opts ...Option) *TypeCatalog {
	o := newOptions(opts)
	ttl := o.ttl
	if ttl == 0 {
		ttl = DefaultTypeTTL
	}
	c := &TypeCatalog{client: client, log: o.logger.Named("servercache").Named("types"), maxStale: o.maxStale}
	c.refresh = newRefresher("server types", ttl, o, c.log, c.fetch)
	return c
}

// Lookup returns the server type with the given name, fetching the
// catalogue first when it is missing or expired; nil, nil when there is no
// such type. When a fetch after the TTL fails or is slow, Lookup answers
// from the catalogue in memory while it is younger than [WithMaxStale].
func (c *TypeCatalog) Lookup(ctx context.Context, name string) (*ServerType, error) {
	if err := c.refresh.ensureStale(ctx, c.maxStale); err != nil {
		return nil, err
	}
	return c.types.Load().byName[name], nil
}

// All returns every server type, fetching first when the catalogue is
// missing or expired, and falling back to a stale catalogue as Lookup
// does. The slice is shared: do not modify it.
func (c *TypeCatalog) All(ctx context.Context) ([]*ServerType, error) {
	if err := c.refresh.ensureStale(ctx, c.maxStale); err != nil {
		return nil, err
	}
	return c.types.Load().list, nil
}

// Current returns the catalogue without I/O, nil before the first fetch.
func (c *TypeCatalog) Current() []*ServerType {
	if t := c.types.Load(); t != nil {
		return t.list
	}
	return nil
}

// StaleSince returns since when lookups have been answered from an expired
// catalogue because fetching a new one failed; zero while the catalogue is
// fresh.
func (c *TypeCatalog) StaleSince() time.Time {
	return c.refresh.stale()
}

// Invalidate makes the next lookup fetch.
func (c *TypeCatalog) Invalidate() {
	c.refresh.invalidate()
}

// Close stops a fetch in flight and waits for it to end.
func (c *TypeCatalog) Close() {
	c.refresh.close()
}

func (c *TypeCatalog) fetch(ctx context.Context) (fetched, error) {
	raw, err := c.client.All(ctx)
	if err != nil {
		return fetched{}, fmt.Errorf("listing server types: %w", err)
	}
	set := &typeSet{
		list:   make([]*ServerType, 0, len(raw)),
		byName: make(map[string]*ServerType, len(raw)),
	}
	var priceErrs []error
	for _, st := range raw {
		if st == nil {
			continue
		}
		t, err := typeFromHCloud(st)
		if err != nil {
			priceErrs = append(priceErrs, err)
		}
		set.list = append(set.list, t)
		set.byName[t.Name] = t
	}
	if len(priceErrs) > 0 {
		// A price the API writes in a form we cannot read costs only the
		// price of that type in that location (HasPrice false); the
		// catalogue is still good for templates.
		c.log.Warn("unreadable server type prices", zap.Error(errors.Join(priceErrs...)))
	}
	c.types.Store(set)
	return fetched{fields: []zap.Field{zap.Int("types", len(set.list))}}, nil
}

// typeFromHCloud converts a server type. The error names each price that
// could not be parsed; the type is complete otherwise.
func typeFromHCloud(st *hcloud.ServerType) (*ServerType, error) {
	t := &ServerType{
		ID:          st.ID,
		Name:        st.Name,
		Description: st.Description,
		Category:    st.Category,
		Cores:       st.Cores,
		MemoryGB:    float64(st.Memory),
		DiskGB:      st.Disk,
		Arch:        archOf(st.Architecture),
		CPUType:     string(st.CPUType),
		StorageType: string(st.StorageType),
		Locations:   make(map[string]TypeLocation, len(st.Locations)),
	}
	for _, l := range st.Locations {
		if l.Location == nil {
			continue
		}
		tl := TypeLocation{
			Available:   l.Available,
			Recommended: l.Recommended,
			Deprecated:  l.IsDeprecated(),
		}
		if l.Deprecation != nil {
			tl.UnavailableAfter = l.Deprecation.UnavailableAfter
		}
		t.Locations[l.Location.Name] = tl
	}
	var errs []error
	for _, p := range st.Pricings {
		if p.Location == nil {
			continue
		}
		name := p.Location.Name
		tl := t.Locations[name]
		hourlyNet, err1 := parsePrice(st.Name, name, "price_hourly.net", p.Hourly.Net)
		hourlyGross, err2 := parsePrice(st.Name, name, "price_hourly.gross", p.Hourly.Gross)
		monthlyNet, err3 := parsePrice(st.Name, name, "price_monthly.net", p.Monthly.Net)
		if err := errors.Join(err1, err2, err3); err != nil {
			errs = append(errs, err)
		} else {
			tl.PriceHourlyNet, tl.PriceHourlyGross, tl.PriceMonthlyNet = hourlyNet, hourlyGross, monthlyNet
			tl.HasPrice = true
		}
		t.Locations[name] = tl
	}
	return t, errors.Join(errs...)
}

func parsePrice(typeName, location, field, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("server type %s: prices[%s].%s: %q is not a decimal number", typeName, location, field, s)
	}
	return v, nil
}

func archOf(a hcloud.Architecture) config.Arch {
	switch a {
	case hcloud.ArchitectureX86:
		return config.ArchAMD64
	case hcloud.ArchitectureARM:
		return config.ArchARM64
	default:
		return ""
	}
}
