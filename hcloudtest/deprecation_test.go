package hcloudtest_test

import (
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestDeprecationOverTime follows a server type through its deprecation:
// orderable until unavailable_after in each location, then available
// false there; deprecated at the top level once every location is.
func TestDeprecationOverTime(t *testing.T) {
	s, client, clock := newFake(t)
	ctx := t.Context()
	at := func(name, location string) hcloud.ServerTypeLocation {
		t.Helper()
		st, _, err := client.ServerType.GetByName(ctx, name)
		if err != nil || st == nil {
			t.Fatalf("GetByName(%s) = %v, %v", name, st, err)
		}
		for _, l := range st.Locations {
			if l.Location.Name == location {
				return l
			}
		}
		t.Fatalf("%s not offered in %s", name, location)
		return hcloud.ServerTypeLocation{}
	}
	locations := []string{"fsn1", "nbg1", "hel1"}
	for i, loc := range locations {
		if err := s.DeprecateServerType("cx23", loc, epoch, epoch.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if l := at("cx23", "fsn1"); !l.Available || !l.IsDeprecated() {
		t.Errorf("cx23 fsn1 before unavailable_after = %+v; want available and deprecated", l)
	}
	clock.Advance(time.Hour)
	if l := at("cx23", "fsn1"); l.Available || l.Recommended {
		t.Errorf("cx23 fsn1 at unavailable_after = %+v; want available and recommended false", l)
	}
	if l := at("cx23", "nbg1"); !l.Available {
		t.Errorf("cx23 nbg1 before its unavailable_after = %+v; want available", l)
	}
	opts := basicCreateOpts("placed", nil)
	opts.Location = nil
	if res := mustCreate(t, client, opts); res.Server.Location.Name != "nbg1" {
		t.Errorf("create without a location landed in %s; want nbg1, the first still orderable", res.Server.Location.Name)
	}
	clock.Advance(2 * time.Hour)
	if l := at("cx23", "hel1"); l.Available {
		t.Errorf("cx23 hel1 after its unavailable_after = %+v; want unavailable", l)
	}
	st, _, _ := client.ServerType.GetByName(ctx, "cx23")
	if !st.IsDeprecated() || !st.UnavailableAfter().Equal(epoch.Add(3*time.Hour)) || !st.DeprecationAnnounced().Equal(epoch) {
		t.Errorf("cx23 top level = %+v; want deprecated, announced %v, unavailable after %v", st.DeprecatableResource, epoch, epoch.Add(3*time.Hour))
	}
	other, _, _ := client.ServerType.GetByName(ctx, "cx33")
	if other.IsDeprecated() {
		t.Errorf("cx33 top level = %+v; want not deprecated", other.DeprecatableResource)
	}
}
