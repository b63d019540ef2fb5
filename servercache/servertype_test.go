package servercache

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

const listServerTypes = "GET /server_types"

func TestTypeCatalogLookup(t *testing.T) {
	fake, client, clock := newFake(t)
	c := NewTypeCatalog(&client.ServerType, WithClock(clock))
	defer c.Close()

	// The expected prices are what the fake answers, parsed.
	raw, _, err := client.ServerType.GetByName(t.Context(), "cax21")
	if err != nil || raw == nil {
		t.Fatalf("GetByName(cax21) = %v, %v", raw, err)
	}
	fake.ResetCounts()
	wantLocations := map[string]TypeLocation{}
	for _, p := range raw.Pricings {
		wantLocations[p.Location.Name] = TypeLocation{
			Available: true, Recommended: true, HasPrice: true,
			PriceHourlyNet:   mustFloat(t, p.Hourly.Net),
			PriceHourlyGross: mustFloat(t, p.Hourly.Gross),
			PriceMonthlyNet:  mustFloat(t, p.Monthly.Net),
		}
	}

	tests := []struct {
		name string
		want *ServerType
	}{
		{"cax21", &ServerType{
			ID: 93, Name: "cax21", Description: "CAX21", Category: "cost_optimized", Cores: 4, MemoryGB: 8, DiskGB: 80,
			Arch: config.ArchARM64, CPUType: "shared", StorageType: "local", Locations: wantLocations,
		}},
		{"cx11", nil}, // retired long ago: no type, no error
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Lookup(t.Context(), tt.name)
			if err != nil {
				t.Fatalf("Lookup(%q) error: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup(%q) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
	all, err := c.All(t.Context())
	if err != nil {
		t.Fatalf("All() error: %v", err)
	}
	arches := map[config.Arch]int{}
	for _, st := range all {
		arches[st.Arch]++
	}
	if arches[config.ArchAMD64] == 0 || arches[config.ArchARM64] == 0 || arches[""] != 0 {
		t.Errorf("architectures of All() = %v; want both amd64 and arm64 and no unknown", arches)
	}
	if got := fake.Count(listServerTypes); got != 1 {
		t.Errorf("two lookups and All() made %d %s requests; want 1", got, listServerTypes)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("ParseFloat(%q): %v", s, err)
	}
	return v
}

func TestTypeCatalogCoalescesAndExpires(t *testing.T) {
	fake, client, clock := newFake(t)
	c := NewTypeCatalog(&client.ServerType, WithClock(clock), WithRand(seqRand(0.5)))
	defer c.Close()
	if c.Current() != nil {
		t.Errorf("Current() before the first fetch = %d types; want nil", len(c.Current()))
	}
	fake.SetLatency(20 * time.Millisecond)

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := c.Lookup(t.Context(), "cpx21"); err != nil {
				t.Errorf("Lookup() error: %v", err)
			}
		})
	}
	wg.Wait()
	if got := fake.Count(listServerTypes); got != 1 {
		t.Errorf("50 concurrent lookups made %d %s requests; want 1", got, listServerTypes)
	}
	if len(c.Current()) == 0 {
		t.Error("Current() after a fetch is empty")
	}

	clock.Step(DefaultTypeTTL - time.Second)
	if _, err := c.Lookup(t.Context(), "cpx21"); err != nil {
		t.Fatalf("Lookup() error: %v", err)
	}
	if got := fake.Count(listServerTypes); got != 1 {
		t.Errorf("a lookup within the TTL fetched: %d requests; want 1", got)
	}
	clock.Step(time.Second)
	if _, err := c.Lookup(t.Context(), "cpx21"); err != nil {
		t.Fatalf("Lookup() error: %v", err)
	}
	if got := fake.Count(listServerTypes); got != 2 {
		t.Errorf("a lookup after the TTL made %d requests in all; want 2", got)
	}
}

func TestTypeFromHCloud(t *testing.T) {
	fsn1, hel1, ash := &hcloud.Location{Name: "fsn1"}, &hcloud.Location{Name: "hel1"}, &hcloud.Location{Name: "ash"}
	unavailableAfter := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	price := func(net, gross string) hcloud.Price { return hcloud.Price{Net: net, Gross: gross} }
	tests := []struct {
		name    string
		in      *hcloud.ServerType
		want    *ServerType
		wantErr []string // substrings of the error; nil: no error
	}{
		{
			name: "deprecated in one location, sold out in another, priced only in a third",
			in: &hcloud.ServerType{
				ID: 1, Name: "cx22", Cores: 2, Memory: 4, Disk: 40, Architecture: hcloud.ArchitectureX86,
				CPUType: hcloud.CPUTypeShared, StorageType: hcloud.StorageTypeLocal,
				Locations: []hcloud.ServerTypeLocation{
					{Location: fsn1, Available: true, DeprecatableResource: hcloud.DeprecatableResource{
						Deprecation: &hcloud.DeprecationInfo{UnavailableAfter: unavailableAfter}}},
					{Location: hel1, Available: false},
					{Location: nil},
				},
				Pricings: []hcloud.ServerTypeLocationPricing{
					{Location: fsn1, Hourly: price("0.0060", "0.0071"), Monthly: price("3.7900", "4.5101")},
					{Location: ash, Hourly: price("0.0100", "0.0119"), Monthly: price("6.0000", "7.1400")},
					{Location: nil},
				},
			},
			want: &ServerType{
				ID: 1, Name: "cx22", Cores: 2, MemoryGB: 4, DiskGB: 40, Arch: config.ArchAMD64, CPUType: "shared", StorageType: "local",
				Locations: map[string]TypeLocation{
					"fsn1": {Available: true, Deprecated: true, UnavailableAfter: unavailableAfter,
						PriceHourlyNet: 0.006, PriceHourlyGross: 0.0071, PriceMonthlyNet: 3.79, HasPrice: true},
					"hel1": {},
					// A price alone does not make a type available.
					"ash": {PriceHourlyNet: 0.01, PriceHourlyGross: 0.0119, PriceMonthlyNet: 6, HasPrice: true},
				},
			},
		},
		{
			name: "unreadable prices and an unknown architecture",
			in: &hcloud.ServerType{
				ID: 2, Name: "future", Architecture: "riscv",
				Locations: []hcloud.ServerTypeLocation{{Location: fsn1, Available: true}},
				Pricings: []hcloud.ServerTypeLocationPricing{
					{Location: fsn1, Hourly: price("abc", "NaN"), Monthly: price("1.0", "1.2")},
				},
			},
			want: &ServerType{
				ID: 2, Name: "future", Arch: "",
				Locations: map[string]TypeLocation{"fsn1": {Available: true}},
			},
			wantErr: []string{
				`server type future: prices[fsn1].price_hourly.net: "abc" is not a decimal number`,
				`server type future: prices[fsn1].price_hourly.gross: "NaN" is not a decimal number`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := typeFromHCloud(tt.in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("typeFromHCloud() mismatch (-want +got):\n%s", diff)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("typeFromHCloud() error = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("typeFromHCloud() error = nil; want one naming %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("typeFromHCloud() error = %q; want it to contain %q", err, want)
				}
			}
		})
	}
}
