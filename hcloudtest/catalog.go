package hcloudtest

import (
	"fmt"
	"math"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// The catalogue below is modelled on Hetzner's public offer. Prices are
// plausible, not authoritative: tests should compare against what the fake
// answers, not against these literals.

// VATRate is the VAT rate of GET /pricing, applied to every gross price.
const VATRate = 19.0

var catalogLocations = []schema.Location{
	{ID: 1, Name: "fsn1", Description: "Falkenstein DC Park 1", Country: "DE", City: "Falkenstein", Latitude: 50.47612, Longitude: 12.370071, NetworkZone: "eu-central"},
	{ID: 2, Name: "nbg1", Description: "Nuremberg DC Park 1", Country: "DE", City: "Nuremberg", Latitude: 49.452102, Longitude: 11.076665, NetworkZone: "eu-central"},
	{ID: 3, Name: "hel1", Description: "Helsinki DC Park 1", Country: "FI", City: "Helsinki", Latitude: 60.169855, Longitude: 24.938379, NetworkZone: "eu-central"},
	{ID: 4, Name: "ash", Description: "Ashburn, VA", Country: "US", City: "Ashburn, VA", Latitude: 39.045821, Longitude: -77.487073, NetworkZone: "us-east"},
	{ID: 5, Name: "hil", Description: "Hillsboro, OR", Country: "US", City: "Hillsboro, OR", Latitude: 45.54222, Longitude: -122.951924, NetworkZone: "us-west"},
	{ID: 6, Name: "sin", Description: "Singapore", Country: "SG", City: "Singapore", Latitude: 1.283333, Longitude: 103.833333, NetworkZone: "ap-southeast"},
}

var (
	euLocations  = []string{"fsn1", "nbg1", "hel1"}
	allLocations = []string{"fsn1", "nbg1", "hel1", "ash", "hil", "sin"}
)

type catalogType struct {
	id           int64
	name         string
	description  string
	category     string
	cores        int
	memory       float32
	disk         int
	cpuType      string
	architecture string
	monthlyEUR   float64 // net monthly price in the EU locations
	locations    []string
}

var catalogTypes = []catalogType{
	{id: 114, name: "cx23", description: "CX23", category: "cost_optimized", cores: 2, memory: 4, disk: 40, cpuType: "shared", architecture: "x86", monthlyEUR: 3.49, locations: euLocations},
	{id: 115, name: "cx33", description: "CX33", category: "cost_optimized", cores: 4, memory: 8, disk: 80, cpuType: "shared", architecture: "x86", monthlyEUR: 5.49, locations: euLocations},
	{id: 116, name: "cx43", description: "CX43", category: "cost_optimized", cores: 8, memory: 16, disk: 160, cpuType: "shared", architecture: "x86", monthlyEUR: 9.49, locations: euLocations},
	{id: 117, name: "cx53", description: "CX53", category: "cost_optimized", cores: 16, memory: 32, disk: 320, cpuType: "shared", architecture: "x86", monthlyEUR: 17.49, locations: euLocations},
	{id: 22, name: "cpx11", description: "CPX 11", category: "regular_purpose", cores: 2, memory: 2, disk: 40, cpuType: "shared", architecture: "x86", monthlyEUR: 4.99, locations: allLocations},
	{id: 23, name: "cpx21", description: "CPX 21", category: "regular_purpose", cores: 3, memory: 4, disk: 80, cpuType: "shared", architecture: "x86", monthlyEUR: 8.99, locations: allLocations},
	{id: 24, name: "cpx31", description: "CPX 31", category: "regular_purpose", cores: 4, memory: 8, disk: 160, cpuType: "shared", architecture: "x86", monthlyEUR: 15.99, locations: allLocations},
	{id: 25, name: "cpx41", description: "CPX 41", category: "regular_purpose", cores: 8, memory: 16, disk: 240, cpuType: "shared", architecture: "x86", monthlyEUR: 29.99, locations: allLocations},
	{id: 26, name: "cpx51", description: "CPX 51", category: "regular_purpose", cores: 16, memory: 32, disk: 360, cpuType: "shared", architecture: "x86", monthlyEUR: 64.99, locations: allLocations},
	{id: 96, name: "ccx13", description: "CCX13 Dedicated CPU", category: "general_purpose", cores: 2, memory: 8, disk: 80, cpuType: "dedicated", architecture: "x86", monthlyEUR: 12.49, locations: allLocations},
	{id: 97, name: "ccx23", description: "CCX23 Dedicated CPU", category: "general_purpose", cores: 4, memory: 16, disk: 160, cpuType: "dedicated", architecture: "x86", monthlyEUR: 24.49, locations: allLocations},
	{id: 98, name: "ccx33", description: "CCX33 Dedicated CPU", category: "general_purpose", cores: 8, memory: 32, disk: 240, cpuType: "dedicated", architecture: "x86", monthlyEUR: 48.49, locations: allLocations},
	{id: 99, name: "ccx43", description: "CCX43 Dedicated CPU", category: "general_purpose", cores: 16, memory: 64, disk: 360, cpuType: "dedicated", architecture: "x86", monthlyEUR: 96.49, locations: allLocations},
	{id: 100, name: "ccx53", description: "CCX53 Dedicated CPU", category: "general_purpose", cores: 32, memory: 128, disk: 600, cpuType: "dedicated", architecture: "x86", monthlyEUR: 192.49, locations: allLocations},
	{id: 101, name: "ccx63", description: "CCX63 Dedicated CPU", category: "general_purpose", cores: 48, memory: 192, disk: 960, cpuType: "dedicated", architecture: "x86", monthlyEUR: 288.49, locations: allLocations},
	{id: 45, name: "cax11", description: "CAX11", category: "cost_optimized", cores: 2, memory: 4, disk: 40, cpuType: "shared", architecture: "arm", monthlyEUR: 3.79, locations: euLocations},
	{id: 93, name: "cax21", description: "CAX21", category: "cost_optimized", cores: 4, memory: 8, disk: 80, cpuType: "shared", architecture: "arm", monthlyEUR: 6.49, locations: euLocations},
	{id: 94, name: "cax31", description: "CAX31", category: "cost_optimized", cores: 8, memory: 16, disk: 160, cpuType: "shared", architecture: "arm", monthlyEUR: 12.49, locations: euLocations},
	{id: 95, name: "cax41", description: "CAX41", category: "cost_optimized", cores: 16, memory: 32, disk: 320, cpuType: "shared", architecture: "arm", monthlyEUR: 24.49, locations: euLocations},
}

// Outside the EU servers cost more and include less traffic.
func locationPriceFactor(loc string) (factor float64, includedTB float64) {
	switch loc {
	case "ash", "hil":
		return 1.2, 1
	case "sin":
		return 1.4, 0.5
	default:
		return 1, 20
	}
}

const terabyte = 1 << 40

// decimal renders a price the way the API does: a decimal string with 16
// fractional digits, of which the first four are significant.
func decimal(v float64) string { return fmt.Sprintf("%.4f000000000000", math.Round(v*1e4)/1e4) }

func price(net float64) schema.Price {
	return schema.Price{Net: decimal(net), Gross: decimal(net * (1 + VATRate/100))}
}

func newCatalogServerType(t catalogType, locs map[string]schema.Location) schema.ServerType {
	st := schema.ServerType{
		ID:           t.id,
		Name:         t.name,
		Description:  t.description,
		Category:     t.category,
		Cores:        t.cores,
		Memory:       t.memory,
		Disk:         t.disk,
		StorageType:  "local",
		CPUType:      t.cpuType,
		Architecture: t.architecture,
		Prices:       []schema.PricingServerTypePrice{},
		Locations:    []schema.ServerTypeLocation{},
	}
	for _, name := range t.locations {
		factor, tb := locationPriceFactor(name)
		monthly := t.monthlyEUR * factor
		// Hourly billing reaches the monthly cap after about 26 days.
		hourly := monthly / 624
		st.Prices = append(st.Prices, schema.PricingServerTypePrice{
			Location:          name,
			PriceHourly:       price(hourly),
			PriceMonthly:      price(monthly),
			IncludedTraffic:   uint64(tb * terabyte),
			PricePerTBTraffic: price(1),
		})
		st.Locations = append(st.Locations, schema.ServerTypeLocation{
			ID:          locs[name].ID,
			Name:        name,
			Available:   true,
			Recommended: true,
		})
	}
	return st
}

type catalogImage struct {
	id           int64
	name         string
	description  string
	osFlavor     string
	osVersion    string
	architecture string
	created      time.Time
}

var catalogImages = []catalogImage{
	{id: 161547269, name: "ubuntu-24.04", description: "Ubuntu 24.04", osFlavor: "ubuntu", osVersion: "24.04", architecture: "x86", created: time.Date(2024, 4, 25, 13, 26, 27, 0, time.UTC)},
	{id: 161547270, name: "ubuntu-24.04", description: "Ubuntu 24.04", osFlavor: "ubuntu", osVersion: "24.04", architecture: "arm", created: time.Date(2024, 4, 25, 13, 26, 57, 0, time.UTC)},
	{id: 67794396, name: "ubuntu-22.04", description: "Ubuntu 22.04", osFlavor: "ubuntu", osVersion: "22.04", architecture: "x86", created: time.Date(2022, 4, 21, 15, 32, 38, 0, time.UTC)},
	{id: 103908070, name: "ubuntu-22.04", description: "Ubuntu 22.04", osFlavor: "ubuntu", osVersion: "22.04", architecture: "arm", created: time.Date(2023, 1, 11, 9, 12, 45, 0, time.UTC)},
	{id: 114690387, name: "debian-12", description: "Debian 12", osFlavor: "debian", osVersion: "12", architecture: "x86", created: time.Date(2023, 6, 13, 6, 0, 2, 0, time.UTC)},
	{id: 114690389, name: "debian-12", description: "Debian 12", osFlavor: "debian", osVersion: "12", architecture: "arm", created: time.Date(2023, 6, 13, 6, 0, 5, 0, time.UTC)},
}
