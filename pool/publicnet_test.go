package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestPublicIPsPerPool creates servers of pools that differ only in their
// public IPs and reads each server back through the API: a server of a
// private pool has neither primary IP and is on the network, and a
// Reconfigure changes the addresses of the servers created after it.
func TestPublicIPsPerPool(t *testing.T) {
	tests := []struct {
		name       string
		ipv4, ipv6 bool
		want       addrs
	}{
		{name: "private only", want: addrs{Private: true}},
		{name: "IPv6 only", ipv6: true, want: addrs{IPv6: true, Private: true}},
		{name: "IPv4 only", ipv4: true, want: addrs{IPv4: true, Private: true}},
		{name: "both", ipv4: true, ipv6: true, want: addrs{IPv4: true, IPv6: true, Private: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.addReferences()
			cfg := poolConfig("workers", 0, 10)
			cfg.Network = "net"
			cfg.PublicIPv4, cfg.PublicIPv6 = tt.ipv4, tt.ipv6
			p := e.newPool(cfg)
			if err := p.IncreaseSize(t.Context(), 2); err != nil {
				t.Fatalf("IncreaseSize(2) error: %v", err)
			}
			e.settle(p)
			got := e.addresses(t, "workers")
			want := []addrs{tt.want, tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("addresses of the servers (-want +got):\n%s", diff)
			}

			// The opposite setting applies to servers created from now on;
			// the two that exist keep theirs.
			cfg.PublicIPv4, cfg.PublicIPv6 = !tt.ipv4, !tt.ipv6
			if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
				t.Fatalf("Reconfigure error: %v", err)
			}
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatalf("IncreaseSize(1) error: %v", err)
			}
			e.settle(p)
			flipped := addrs{IPv4: !tt.ipv4, IPv6: !tt.ipv6, Private: true}
			if diff := cmp.Diff(append(want, flipped), e.addresses(t, "workers")); diff != "" {
				t.Errorf("addresses after Reconfigure (-want +got):\n%s", diff)
			}
		})
	}
}

// addrs says which addresses a server has.
type addrs struct{ IPv4, IPv6, Private bool }

// addresses reads the servers of pool through the API, in the listing's
// order (by ID), and says which addresses each has.
func (e *env) addresses(t *testing.T, pool string) []addrs {
	t.Helper()
	servers, err := e.client.Server.AllWithOpts(t.Context(), hcloud.ServerListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: "hcloud/node-group=" + pool},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]addrs, 0, len(servers))
	for _, s := range servers {
		out = append(out, addrs{
			IPv4:    s.PublicNet.IPv4.ID != 0 && !s.PublicNet.IPv4.IsUnspecified(),
			IPv6:    s.PublicNet.IPv6.ID != 0 && !s.PublicNet.IPv6.IsUnspecified(),
			Private: len(s.PrivateNet) == 1,
		})
	}
	return out
}
