package hcloudtest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestServerTypeCatalogue(t *testing.T) {
	_, client, _ := newFake(t)
	types, err := client.ServerType.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range types {
		names = append(names, st.Name)
	}
	for _, want := range []string{"cx23", "cx53", "cpx11", "cpx51", "ccx13", "ccx63", "cax11", "cax41"} {
		if !slices.Contains(names, want) {
			t.Errorf("catalogue lacks %s; have %v", want, names)
		}
	}

	cax, _, err := client.ServerType.GetByName(t.Context(), "cax11")
	if err != nil || cax == nil {
		t.Fatalf("GetByName(cax11) = %v, %v", cax, err)
	}
	type summary struct {
		Cores        int
		Memory       float32
		Disk         int
		Architecture hcloud.Architecture
		CPUType      hcloud.CPUType
		StorageType  hcloud.StorageType
		Locations    []string
		Available    []bool
	}
	got := summary{Cores: cax.Cores, Memory: cax.Memory, Disk: cax.Disk, Architecture: cax.Architecture, CPUType: cax.CPUType, StorageType: cax.StorageType}
	for _, l := range cax.Locations {
		got.Locations = append(got.Locations, l.Location.Name)
		got.Available = append(got.Available, l.Available)
	}
	want := summary{Cores: 2, Memory: 4, Disk: 40, Architecture: hcloud.ArchitectureARM, CPUType: hcloud.CPUTypeShared, StorageType: hcloud.StorageTypeLocal,
		Locations: []string{"fsn1", "nbg1", "hel1"}, Available: []bool{true, true, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cax11 (-want +got):\n%s", diff)
	}
	if len(cax.Pricings) != 3 {
		t.Fatalf("cax11 prices = %d; want one per location", len(cax.Pricings))
	}
	p := cax.Pricings[0]
	if p.Location.Name != "fsn1" || p.Monthly.Net != "3.7900000000000000" || p.Monthly.Gross != "4.5101000000000000" {
		t.Errorf("cax11 fsn1 monthly = %+v at %s; want net 3.79, gross +19%% as 16-digit decimals", p.Monthly, p.Location.Name)
	}

	ded, _, _ := client.ServerType.GetByName(t.Context(), "ccx13")
	if ded.CPUType != hcloud.CPUTypeDedicated || len(ded.Locations) != 6 {
		t.Errorf("ccx13 = %s in %d locations; want dedicated in 6", ded.CPUType, len(ded.Locations))
	}
}

func TestServerTypeAvailabilityAndDeprecation(t *testing.T) {
	s, client, clock := newFake(t)
	if err := s.SetServerTypeAvailable("cx33", "nbg1", false); err != nil {
		t.Fatal(err)
	}
	if err := s.DeprecateServerType("cx43", "hel1", epoch, epoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetServerTypeAvailable("cax11", "ash", false); err == nil {
		t.Error("SetServerTypeAvailable(cax11, ash) = nil; want an error (not offered there)")
	}
	st, _, _ := client.ServerType.GetByName(t.Context(), "cx33")
	for _, l := range st.Locations {
		if l.Location.Name == "nbg1" && l.Available {
			t.Error("cx33 nbg1 available = true; want false")
		}
	}
	create := func(name, typ, loc string) error {
		o := basicCreateOpts(name, nil)
		o.ServerType = &hcloud.ServerType{Name: typ}
		o.Location = &hcloud.Location{Name: loc}
		_, _, err := client.Server.Create(t.Context(), o)
		return err
	}
	if err := create("a", "cx33", "nbg1"); !hcloud.IsError(err, hcloud.ErrorCodeResourceUnavailable) {
		t.Errorf("create cx33 in nbg1 error = %v; want resource_unavailable", err)
	}
	if err := create("b", "cx43", "hel1"); err != nil {
		t.Errorf("create cx43 in hel1 before unavailable_after: %v", err)
	}
	clock.Advance(time.Hour)
	if err := create("c", "cx43", "hel1"); !hcloud.IsError(err, hcloud.ErrorCodeInvalidServerType) {
		t.Errorf("create cx43 in hel1 after unavailable_after error = %v; want invalid_server_type", err)
	}
	dep, _, _ := client.ServerType.GetByName(t.Context(), "cx43")
	for _, l := range dep.Locations {
		if l.Location.Name == "hel1" && !l.IsDeprecated() {
			t.Error("cx43 hel1 is not deprecated in the catalogue")
		}
	}
}

func TestLocationsAndPricing(t *testing.T) {
	_, client, _ := newFake(t)
	locs, err := client.Location.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hcloud.NetworkZone{}
	for _, l := range locs {
		got[l.Name] = l.NetworkZone
	}
	want := map[string]hcloud.NetworkZone{
		"fsn1": "eu-central", "nbg1": "eu-central", "hel1": "eu-central",
		"ash": "us-east", "hil": "us-west", "sin": "ap-southeast",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("locations (-want +got):\n%s", diff)
	}
	l, _, err := client.Location.GetByName(t.Context(), "hel1")
	if err != nil || l == nil || l.Country != "FI" {
		t.Errorf("GetByName(hel1) = %+v, %v; want Helsinki, FI", l, err)
	}

	pricing, _, err := client.Pricing.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pricing.Image.PerGBMonth.Currency != "EUR" || pricing.Image.PerGBMonth.VATRate != "19.00" {
		t.Errorf("currency/VAT = %s/%s; want EUR/19.00", pricing.Image.PerGBMonth.Currency, pricing.Image.PerGBMonth.VATRate)
	}
	if len(pricing.ServerTypes) != 19 {
		t.Errorf("priced server types = %d; want 19", len(pricing.ServerTypes))
	}
}

func TestImages(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	old, err := s.AddImage(hcloudtest.Image{Description: "old", Labels: map[string]string{"pool": "a"}, Created: epoch.Add(-2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	newer, err := s.AddImage(hcloudtest.Image{Description: "new", Labels: map[string]string{"pool": "a"}, Created: epoch.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	armSnap, err := s.AddSnapshot("arm", hcloud.ArchitectureARM, map[string]string{"pool": "a"})
	if err != nil {
		t.Fatal(err)
	}
	creating, err := s.AddImage(hcloudtest.Image{Description: "creating", Status: hcloud.ImageStatusCreating, Labels: map[string]string{"pool": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	deprecated, err := s.AddImage(hcloudtest.Image{Name: "ubuntu-20.04", Type: hcloud.ImageTypeSystem, Deprecated: epoch.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddImage(hcloudtest.Image{Type: "bogus", Architecture: "mips"}); err == nil {
		t.Error("AddImage with bad type and architecture = nil error")
	}

	ids := func(imgs []*hcloud.Image) []int64 {
		var out []int64
		for _, i := range imgs {
			out = append(out, i.ID)
		}
		return out
	}
	tests := []struct {
		name string
		opts hcloud.ImageListOpts
		want []int64
	}{
		{"newest available x86 snapshot by label", hcloud.ImageListOpts{
			ListOpts: hcloud.ListOpts{LabelSelector: "pool=a"},
			Type:     []hcloud.ImageType{hcloud.ImageTypeSnapshot}, Status: []hcloud.ImageStatus{hcloud.ImageStatusAvailable},
			Architecture: []hcloud.Architecture{hcloud.ArchitectureX86}, Sort: []string{"created:desc"},
		}, []int64{newer, old}},
		{"every snapshot", hcloud.ImageListOpts{Type: []hcloud.ImageType{hcloud.ImageTypeSnapshot}}, []int64{old, newer, armSnap, creating}},
		{"deprecated hidden", hcloud.ImageListOpts{Name: "ubuntu-20.04"}, nil},
		{"deprecated included", hcloud.ImageListOpts{Name: "ubuntu-20.04", IncludeDeprecated: true}, []int64{deprecated}},
		{"system by name and arch", hcloud.ImageListOpts{Name: "ubuntu-24.04", Architecture: []hcloud.Architecture{hcloud.ArchitectureARM}}, []int64{161547270}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.Image.AllWithOpts(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}

	img, _, err := client.Image.GetForArchitecture(ctx, "debian-12", hcloud.ArchitectureARM)
	if err != nil || img == nil || img.Architecture != hcloud.ArchitectureARM || img.OSFlavor != "debian" {
		t.Errorf("GetForArchitecture(debian-12, arm) = %+v, %v", img, err)
	}
	snap, _, err := client.Image.GetByID(ctx, newer)
	if err != nil || snap == nil || snap.Labels["pool"] != "a" || !snap.Created.Equal(epoch.Add(-time.Hour)) {
		t.Errorf("GetByID(snapshot) = %+v, %v", snap, err)
	}

	o := basicCreateOpts("from-snapshot", nil)
	o.Image = &hcloud.Image{ID: newer}
	if res := mustCreate(t, client, o); res.Server.Image.ID != newer {
		t.Errorf("server image = %d; want %d", res.Server.Image.ID, newer)
	}
	o = basicCreateOpts("wrong-arch", nil)
	o.Image = &hcloud.Image{ID: armSnap}
	if _, _, err := client.Server.Create(ctx, o); !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
		t.Errorf("create x86 server from an arm snapshot error = %v; want invalid_input", err)
	}
	o = basicCreateOpts("not-ready", nil)
	o.Image = &hcloud.Image{ID: creating}
	if _, _, err := client.Server.Create(ctx, o); !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
		t.Errorf("create from a creating snapshot error = %v; want invalid_input", err)
	}
	if err := s.SetImageStatus(creating, hcloud.ImageStatusAvailable); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.Create(ctx, o); err != nil {
		t.Errorf("create from the snapshot once available: %v", err)
	}
}
