package servercache

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		name       string
		providerID string
		wantID     int64
		wantOK     bool
	}{
		{"cloud server", "hcloud://4711", 4711, true},
		{"one digit", "hcloud://1", 1, true},
		{"largest int64", "hcloud://9223372036854775807", 9223372036854775807, true},
		{"int64 overflow", "hcloud://9223372036854775808", 0, false},
		{"twenty digits", "hcloud://12345678901234567890", 0, false},
		{"robot scheme", "hrobot://1", 0, false},
		{"legacy robot form", "hcloud://bm-1", 0, false},
		{"other cloud", "aws:///eu-central-1a/i-0123456789", 0, false},
		{"kind node", "kind://docker/kind/kind-worker", 0, false},
		{"empty", "", 0, false},
		{"scheme only", "hcloud://", 0, false},
		{"zero is no server ID", "hcloud://0", 0, false},
		{"leading zero would not round-trip", "hcloud://042", 0, false},
		{"sign", "hcloud://+42", 0, false},
		{"negative", "hcloud://-42", 0, false},
		{"trailing garbage", "hcloud://42x", 0, false},
		{"trailing slash", "hcloud://42/", 0, false},
		{"space", "hcloud:// 42", 0, false},
		{"upper-case scheme", "HCLOUD://42", 0, false},
		{"bare number", "42", 0, false},
		{"non-ASCII digit", "hcloud://４２", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := ParseProviderID(tt.providerID)
			if id != tt.wantID || ok != tt.wantOK {
				t.Errorf("ParseProviderID(%q) = %d, %v; want %d, %v", tt.providerID, id, ok, tt.wantID, tt.wantOK)
			}
		})
	}
}

func TestParseProviderIDDoesNotAllocate(t *testing.T) {
	for _, providerID := range []string{"hcloud://4711", "hcloud://bm-1", "hcloud://99999999999999999999", "hrobot://1", ""} {
		allocs := testing.AllocsPerRun(100, func() { ParseProviderID(providerID) })
		if allocs != 0 {
			t.Errorf("ParseProviderID(%q) allocates %v times per call; want 0", providerID, allocs)
		}
	}
}

// FuzzParseProviderID checks ParseProviderID against strconv: it accepts
// exactly the canonical decimal form of a positive int64 after the
// "hcloud://" prefix, and what it accepts round-trips through
// Server.ProviderID.
func FuzzParseProviderID(f *testing.F) {
	for _, seed := range []string{
		"hcloud://1", "hcloud://4711", "hcloud://9223372036854775807", "hcloud://9223372036854775808",
		"hcloud://0", "hcloud://007", "hcloud://bm-1", "hrobot://1", "hcloud://", "", "hcloud://-1", "hcloud://+1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, providerID string) {
		id, ok := ParseProviderID(providerID)

		digits, hasPrefix := strings.CutPrefix(providerID, ProviderIDPrefix)
		v, err := strconv.ParseInt(digits, 10, 64)
		wantOK := hasPrefix && err == nil && v > 0 && strconv.FormatInt(v, 10) == digits
		if ok != wantOK {
			t.Fatalf("ParseProviderID(%q) ok = %v; want %v", providerID, ok, wantOK)
		}
		if !ok {
			if id != 0 {
				t.Fatalf("ParseProviderID(%q) = %d, false; want 0 with false", providerID, id)
			}
			return
		}
		if id != v {
			t.Fatalf("ParseProviderID(%q) = %d; want %d", providerID, id, v)
		}
		if got := (&Server{ID: id}).ProviderID(); got != providerID {
			t.Fatalf("ProviderID of ParseProviderID(%q) = %q; want the input back", providerID, got)
		}
	})
}

func TestFromHCloud(t *testing.T) {
	created := time.Date(2026, 8, 1, 12, 30, 0, 0, time.FixedZone("CEST", 2*60*60))
	tests := []struct {
		name string
		in   *hcloud.Server
		want Server
	}{
		{
			name: "pool server",
			in: &hcloud.Server{
				ID:             42,
				Name:           "workers-1a2b3c4d5e6f7a8b",
				Status:         hcloud.ServerStatusRunning,
				Created:        created,
				ServerType:     &hcloud.ServerType{ID: 22, Name: "cpx22"},
				Location:       &hcloud.Location{ID: 1, Name: "fsn1"},
				Labels:         map[string]string{"hcloud/node-group": "workers", "hcloudscale/cluster": "prod", "team": "a"},
				Image:          &hcloud.Image{ID: 5},
				PlacementGroup: &hcloud.PlacementGroup{ID: 6},
				PrivateNet:     []hcloud.ServerPrivateNet{{Network: &hcloud.Network{ID: 9}}},
				PublicNet: hcloud.ServerPublicNet{Firewalls: []*hcloud.ServerFirewallStatus{
					{Firewall: hcloud.Firewall{ID: 11}}, {Firewall: hcloud.Firewall{ID: 12}},
				}},
			},
			want: Server{
				ID: 42, Name: "workers-1a2b3c4d5e6f7a8b", Pool: "workers", Status: hcloud.ServerStatusRunning,
				ServerType: "cpx22", Location: "fsn1", Created: time.Date(2026, 8, 1, 10, 30, 0, 0, time.UTC),
				ImageID: 5, PlacementGroupID: 6, NetworkIDs: []int64{9}, FirewallIDs: []int64{11, 12},
				Labels: map[string]string{"hcloud/node-group": "workers", "hcloudscale/cluster": "prod", "team": "a"},
			},
		},
		{
			name: "no pool label gives an empty pool",
			in:   &hcloud.Server{ID: 7, Name: "bastion", Status: hcloud.ServerStatusOff, Labels: map[string]string{"role": "bastion"}},
			want: Server{ID: 7, Name: "bastion", Status: hcloud.ServerStatusOff, Created: time.Time{}.UTC(), Labels: map[string]string{"role": "bastion"}},
		},
		{
			name: "nil labels, type and location",
			in:   &hcloud.Server{ID: 8, Name: "bare", Status: hcloud.ServerStatusInitializing},
			want: Server{ID: 8, Name: "bare", Status: hcloud.ServerStatusInitializing, Created: time.Time{}.UTC()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromHCloud(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromHCloud() mismatch (-want +got):\n%s", diff)
			}
			if got.Created.Location() != time.UTC {
				t.Errorf("FromHCloud().Created location = %v; want UTC", got.Created.Location())
			}
		})
	}
}
