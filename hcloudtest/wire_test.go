package hcloudtest_test

import (
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestPaginationLinkHeader checks the Link header of a list page, which
// the API sends besides meta.pagination.
func TestPaginationLinkHeader(t *testing.T) {
	s, client, _ := newFake(t)
	for range 5 {
		if _, err := s.AddServer(hcloudtest.ServerInfo{Labels: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, resp, err := client.Server.List(t.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{Page: 2, PerPage: 2, LabelSelector: "k=v"}})
	if err != nil {
		t.Fatal(err)
	}
	base := s.URL() + "/servers?label_selector=k%3Dv&page="
	want := "<" + base + "1&per_page=2>; rel=\"prev\", <" + base + "3&per_page=2>; rel=\"next\", <" + base + "3&per_page=2>; rel=\"last\""
	if got := resp.Header.Get("Link"); got != want {
		t.Errorf("Link = %s\nwant %s", got, want)
	}
	if resp.Meta.Pagination == nil || resp.Meta.Pagination.LastPage != 3 {
		t.Errorf("meta.pagination = %+v; want last page 3", resp.Meta.Pagination)
	}
}

// TestPricingDeprecatedObjects checks GET /pricing against hcloud-go's
// fixture: floating_ip and traffic carry prices, and Primary IP prices
// have no datacenter.
func TestPricingDeprecatedObjects(t *testing.T) {
	s, client, _ := newFake(t)
	p, _, err := client.Pricing.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	//nolint:staticcheck // the deprecated field is what the check is about
	if p.FloatingIP.Monthly.Net == "" || p.FloatingIP.Monthly.Gross == "" {
		t.Errorf("floating_ip = %+v; want a monthly price", p.FloatingIP)
	}
	body := getRaw(t, s, "/pricing")
	for _, bad := range []string{`"datacenter"`, `"net":""`, `"gross":""`} {
		if strings.Contains(body, bad) {
			t.Errorf("GET /pricing contains %s: %s", bad, body)
		}
	}
	if !strings.Contains(body, `"traffic":{"price_per_tb":{"net":"0.0000`) {
		t.Errorf("GET /pricing: want traffic priced at zero: %s", body)
	}
}

// TestFirewallPendingWhileCreating checks that a new server's firewalls
// are pending until the server is created, then applied.
func TestFirewallPendingWhileCreating(t *testing.T) {
	s, client, clock := newFake(t)
	fwID, err := s.AddFirewall(hcloudtest.Firewall{Name: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	opts := basicCreateOpts("walled", nil)
	opts.Firewalls = []*hcloud.ServerCreateFirewall{{Firewall: hcloud.Firewall{ID: fwID}}}
	res := mustCreate(t, client, opts)
	status := func() hcloud.FirewallStatus {
		srv, _, err := client.Server.GetByID(t.Context(), res.Server.ID)
		if err != nil || srv == nil || len(srv.PublicNet.Firewalls) != 1 {
			t.Fatalf("GetByID = %+v, %v; want the server with one firewall", srv, err)
		}
		return srv.PublicNet.Firewalls[0].Status
	}
	if got := status(); got != hcloud.FirewallStatusPending {
		t.Errorf("firewall while creating = %s; want pending", got)
	}
	if err := waitFor(t, client, clock, res.Action); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != hcloud.FirewallStatusApplied {
		t.Errorf("firewall once created = %s; want applied", got)
	}
}
