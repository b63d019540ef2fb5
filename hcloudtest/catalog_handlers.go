package hcloudtest

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

func cloneServerType(t schema.ServerType) schema.ServerType {
	t.Prices = slices.Clone(t.Prices)
	t.Locations = slices.Clone(t.Locations)
	return t
}

func handleGetServerType(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	t := s.st.serverTypeByID(id)
	if t == nil {
		return response{}, notFound("server type")
	}
	return ok200(schema.ServerTypeGetResponse{ServerType: serverTypeAsOf(*t, r.now)}), nil
}

var serverTypeSorts = map[string]func(a, b schema.ServerType) int{
	"id":   func(a, b schema.ServerType) int { return cmp.Compare(a.ID, b.ID) },
	"name": func(a, b schema.ServerType) int { return cmp.Compare(a.Name, b.Name) },
}

func handleListServerTypes(s *Server, r *request) (response, *apiError) {
	name := r.query.Get("name")
	var list []schema.ServerType
	for _, t := range s.st.serverTypes {
		if name == "" || t.Name == name {
			list = append(list, serverTypeAsOf(t, r.now))
		}
	}
	if err := sortList(list, r.query["sort"], serverTypeSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	return ok200(map[string]any{"server_types": page, "meta": m}), nil
}

func handleGetLocation(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	l := s.st.locationByID(id)
	if l == nil {
		return response{}, notFound("location")
	}
	return ok200(schema.LocationGetResponse{Location: *l}), nil
}

var locationSorts = map[string]func(a, b schema.Location) int{
	"id":   func(a, b schema.Location) int { return cmp.Compare(a.ID, b.ID) },
	"name": func(a, b schema.Location) int { return cmp.Compare(a.Name, b.Name) },
}

func handleListLocations(s *Server, r *request) (response, *apiError) {
	name := r.query.Get("name")
	var list []schema.Location
	for _, l := range s.st.locations {
		if name == "" || l.Name == name {
			list = append(list, l)
		}
	}
	if err := sortList(list, r.query["sort"], locationSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	return ok200(map[string]any{"locations": page, "meta": m}), nil
}

// pricingJSON is GET /pricing as the API sends it today: Primary IP
// prices per location without the removed per-datacenter field, which
// schema.PricingPrimaryIPTypePrice still has.
type pricingJSON struct {
	schema.Pricing
	PrimaryIPs []pricingPrimaryIP `json:"primary_ips"`
}

type pricingPrimaryIP struct {
	Type   string                  `json:"type"`
	Prices []pricingPrimaryIPPrice `json:"prices"`
}

type pricingPrimaryIPPrice struct {
	Location     string       `json:"location"`
	PriceHourly  schema.Price `json:"price_hourly"`
	PriceMonthly schema.Price `json:"price_monthly"`
}

// handlePricing answers GET /pricing: EUR, the VAT rate, and the
// per-location server type prices of the catalogue. The deprecated
// floating_ip (one monthly IPv4 price) and traffic (zero since
// 2024-08-05) objects are still sent, with prices, as in hcloud-go's
// fixture.
func handlePricing(s *Server, _ *request) (response, *apiError) {
	p := pricingJSON{Pricing: schema.Pricing{
		Currency:          "EUR",
		VATRate:           fmt.Sprintf("%.2f", VATRate),
		Image:             schema.PricingImage{PricePerGBMonth: price(0.011)},
		FloatingIP:        schema.PricingFloatingIP{PriceMonthly: price(3)},
		FloatingIPs:       []schema.PricingFloatingIPType{},
		Traffic:           schema.PricingTraffic{PricePerTB: price(0)},
		ServerBackup:      schema.PricingServerBackup{Percentage: "20.00"},
		ServerTypes:       []schema.PricingServerType{},
		LoadBalancerTypes: []schema.PricingLoadBalancerType{},
		Volume:            schema.PricingVolume{PricePerGBPerMonth: price(0.044)},
	}}
	// The API prices both IP versions as floating and as primary IPs.
	// hcloud-go sizes its primary IP result by the floating IP count, so
	// the two lists must be equally long, as they are in the real answer.
	ipv4 := pricingPrimaryIP{Type: "ipv4"}
	ipv6 := pricingPrimaryIP{Type: "ipv6"}
	fipv4 := schema.PricingFloatingIPType{Type: "ipv4"}
	fipv6 := schema.PricingFloatingIPType{Type: "ipv6"}
	for _, l := range s.st.locations {
		ipv4.Prices = append(ipv4.Prices, pricingPrimaryIPPrice{Location: l.Name, PriceHourly: price(0.0008), PriceMonthly: price(0.5)})
		ipv6.Prices = append(ipv6.Prices, pricingPrimaryIPPrice{Location: l.Name, PriceHourly: price(0), PriceMonthly: price(0)})
		fipv4.Prices = append(fipv4.Prices, schema.PricingFloatingIPTypePrice{Location: l.Name, PriceMonthly: price(3)})
		fipv6.Prices = append(fipv6.Prices, schema.PricingFloatingIPTypePrice{Location: l.Name, PriceMonthly: price(1)})
	}
	p.PrimaryIPs = append(p.PrimaryIPs, ipv4, ipv6)
	p.FloatingIPs = append(p.FloatingIPs, fipv4, fipv6)
	for _, t := range s.st.serverTypes {
		p.ServerTypes = append(p.ServerTypes, schema.PricingServerType{ID: t.ID, Name: t.Name, Prices: slices.Clone(t.Prices)})
	}
	return ok200(map[string]any{"pricing": p}), nil
}
