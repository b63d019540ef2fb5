package hcloudtest

import (
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// serverTypeAsOf is a catalogue server type as the API shows it at now. A
// location whose deprecation has reached unavailable_after can no longer
// be ordered there: available and recommended turn false. The top-level
// deprecated and deprecation, which the API phases out in favour of the
// per-location ones, are set once the type is deprecated in every
// location: announced the earliest announcement, unavailable after the
// last location's date. The reference does not say how the top level
// derives from the locations; this is the fake's reading.
func serverTypeAsOf(t schema.ServerType, now time.Time) schema.ServerType {
	t = cloneServerType(t)
	everywhere := len(t.Locations) > 0
	var top *schema.DeprecationInfo
	for i := range t.Locations {
		l := &t.Locations[i]
		if l.Deprecation == nil {
			everywhere = false
			continue
		}
		d := *l.Deprecation
		l.Deprecation = &d
		if !now.Before(d.UnavailableAfter) {
			l.Available, l.Recommended = false, false
		}
		if top == nil {
			top = &schema.DeprecationInfo{Announced: d.Announced, UnavailableAfter: d.UnavailableAfter}
			continue
		}
		if d.Announced.Before(top.Announced) {
			top.Announced = d.Announced
		}
		if d.UnavailableAfter.After(top.UnavailableAfter) {
			top.UnavailableAfter = d.UnavailableAfter
		}
	}
	if everywhere {
		t.Deprecated, t.Deprecation = true, top
	}
	return t
}
