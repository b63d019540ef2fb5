package hcloudtest_test

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestAttachToNetwork(t *testing.T) {
	s, client, clock := newFake(t)
	ctx := t.Context()
	netID, err := s.AddNetwork(hcloudtest.Network{
		Name: "k8s", IPRange: "10.0.0.0/8", Labels: map[string]string{"cluster": "c1"},
		Subnets: []hcloudtest.Subnet{
			{IPRange: "10.1.0.0/24"},
			{IPRange: "10.2.0.0/24"},
			{IPRange: "10.3.0.0/24", NetworkZone: "us-east"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	network, _, err := client.Network.GetByName(ctx, "k8s")
	if err != nil || network == nil || network.ID != netID || len(network.Subnets) != 3 {
		t.Fatalf("GetByName(k8s) = %+v, %v", network, err)
	}

	newStopped := func(name string) *hcloud.Server {
		o := basicCreateOpts(name, nil)
		o.StartAfterCreate = ptr(false)
		res := mustCreate(t, client, o)
		if err := waitFor(t, client, clock, res.Action); err != nil {
			t.Fatal(err)
		}
		return res.Server
	}

	tests := []struct {
		name    string
		opts    hcloud.ServerAttachToNetworkOpts
		wantIP  string
		wantErr hcloud.ErrorCode
	}{
		{name: "subnet by ip_range", opts: hcloud.ServerAttachToNetworkOpts{IPRange: mustCIDR(t, "10.2.0.0/24")}, wantIP: "10.2.0.1"},
		{name: "second server, next IP", opts: hcloud.ServerAttachToNetworkOpts{IPRange: mustCIDR(t, "10.2.0.0/24")}, wantIP: "10.2.0.2"},
		{name: "first subnet of the zone", wantIP: "10.1.0.1"},
		{name: "explicit IP", opts: hcloud.ServerAttachToNetworkOpts{IP: net.ParseIP("10.1.0.77")}, wantIP: "10.1.0.77"},
		{name: "IP taken", opts: hcloud.ServerAttachToNetworkOpts{IP: net.ParseIP("10.1.0.77")}, wantErr: hcloud.ErrorCodeIPNotAvailable},
		{name: "subnet in another zone", opts: hcloud.ServerAttachToNetworkOpts{IPRange: mustCIDR(t, "10.3.0.0/24")}, wantErr: hcloud.ErrorCodeNoSubnetAvailable},
		{name: "no such subnet", opts: hcloud.ServerAttachToNetworkOpts{IPRange: mustCIDR(t, "10.9.0.0/24")}, wantErr: hcloud.ErrorCodeInvalidInput},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newStopped(fmt.Sprintf("attach-%d", i))
			tt.opts.Network = &hcloud.Network{ID: netID}
			action, _, err := client.Server.AttachToNetwork(ctx, srv, tt.opts)
			if tt.wantErr != "" {
				if !hcloud.IsError(err, tt.wantErr) {
					t.Fatalf("AttachToNetwork error = %v; want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := waitFor(t, client, clock, action); err != nil {
				t.Fatal(err)
			}
			got, _, err := client.Server.GetByID(ctx, srv.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.PrivateNet) != 1 || got.PrivateNet[0].IP.String() != tt.wantIP {
				t.Errorf("private net = %+v; want IP %s", got.PrivateNet, tt.wantIP)
			}
			_, _, err = client.Server.AttachToNetwork(ctx, srv, tt.opts)
			if !hcloud.IsError(err, hcloud.ErrorCodeServerAlreadyAttached) {
				t.Errorf("second attach error = %v; want server_already_attached", err)
			}
		})
	}
	network, _, _ = client.Network.GetByID(ctx, netID)
	if len(network.Servers) != 4 {
		t.Errorf("network servers = %d; want 4", len(network.Servers))
	}
}

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFailedAttachDetaches(t *testing.T) {
	s, client, clock := newFake(t)
	netID, err := s.AddNetwork(hcloudtest.Network{Name: "n", IPRange: "10.0.0.0/16", Subnets: []hcloudtest.Subnet{{IPRange: "10.0.0.0/24"}}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.AddServer(hcloudtest.ServerInfo{Name: "x", Status: hcloud.ServerStatusOff})
	if err != nil {
		t.Fatal(err)
	}
	s.FailAction("attach_to_network", "no_subnet_available", "subnet full")
	a, _, err := client.Server.AttachToNetwork(t.Context(), &hcloud.Server{ID: id}, hcloud.ServerAttachToNetworkOpts{Network: &hcloud.Network{ID: netID}})
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(t, client, clock, a)
	var aerr hcloud.ActionError
	if !errors.As(err, &aerr) || aerr.Code != "no_subnet_available" {
		t.Fatalf("WaitFor error = %v; want ActionError no_subnet_available", err)
	}
	info, _ := s.ServerByID(id)
	if len(info.Networks) != 0 {
		t.Errorf("networks after the failed attach = %v; want none", info.Networks)
	}
}

func TestReferencedResourcesByName(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	fw, err := s.AddFirewall(hcloudtest.Firewall{Name: "fw", Labels: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.AddSSHKey(hcloudtest.SSHKey{Name: "key"})
	if err != nil {
		t.Fatal(err)
	}
	pg, err := s.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "pg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddFirewall(hcloudtest.Firewall{Name: "fw"}); err == nil {
		t.Error("AddFirewall with a taken name = nil error")
	}
	srvID, err := s.AddServer(hcloudtest.ServerInfo{Name: "member", Firewalls: []int64{fw}, PlacementGroup: pg})
	if err != nil {
		t.Fatal(err)
	}

	gotFW, _, err := client.Firewall.Get(ctx, "fw")
	if err != nil || gotFW == nil || gotFW.ID != fw || len(gotFW.AppliedTo) != 1 || gotFW.AppliedTo[0].Server.ID != srvID {
		t.Errorf("Firewall.Get(fw) = %+v, %v; want it applied to %d", gotFW, err, srvID)
	}
	gotKey, _, err := client.SSHKey.Get(ctx, "key")
	if err != nil || gotKey == nil || gotKey.ID != key || gotKey.Fingerprint == "" {
		t.Errorf("SSHKey.Get(key) = %+v, %v", gotKey, err)
	}
	byFP, _, err := client.SSHKey.GetByFingerprint(ctx, gotKey.Fingerprint)
	if err != nil || byFP == nil || byFP.ID != key {
		t.Errorf("GetByFingerprint = %+v, %v", byFP, err)
	}
	gotPG, _, err := client.PlacementGroup.Get(ctx, "pg")
	if err != nil || gotPG == nil || gotPG.Type != hcloud.PlacementGroupTypeSpread || len(gotPG.Servers) != 1 {
		t.Errorf("PlacementGroup.Get(pg) = %+v, %v", gotPG, err)
	}
	if f, _, err := client.Firewall.Get(ctx, "nope"); f != nil || err != nil {
		t.Errorf("Firewall.Get(nope) = %v, %v; want nil, nil", f, err)
	}
}

func TestPlacementGroupMemberLimit(t *testing.T) {
	s, client, _ := newFake(t)
	pg, err := s.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "spread"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range hcloudtest.MaxPlacementGroupServers {
		o := basicCreateOpts(fmt.Sprintf("pg-%d", i), nil)
		o.PlacementGroup = &hcloud.PlacementGroup{ID: pg}
		mustCreate(t, client, o)
	}
	o := basicCreateOpts("pg-full", nil)
	o.PlacementGroup = &hcloud.PlacementGroup{ID: pg}
	_, _, err = client.Server.Create(t.Context(), o)
	if !hcloud.IsError(err, hcloudtest.ErrorCodePlacementGroupMemberLimitReached) {
		t.Fatalf("11th create error = %v; want placement_group_member_limit_reached", err)
	}
	want := fmt.Sprintf("placement group with ID %d contains already 10 servers", pg)
	if herr := err.(hcloud.Error); herr.Message != want {
		t.Errorf("message = %q; want %q", herr.Message, want)
	}
}

func TestServerLimit(t *testing.T) {
	s, client, clock := newFake(t, hcloudtest.WithServerLimit(2))
	first := mustCreate(t, client, basicCreateOpts("one", nil))
	mustCreate(t, client, basicCreateOpts("two", nil))
	_, resp, err := client.Server.Create(t.Context(), basicCreateOpts("three", nil))
	if !hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		t.Fatalf("third create error = %v; want resource_limit_exceeded", err)
	}
	// hcloud-go decodes details only for invalid_input; the limits are in
	// the body, which it restores after parsing.
	body := readAll(t, resp)
	want := `{"error":{"code":"resource_limit_exceeded","message":"server limit exceeded","details":{"limits":[{"name":"server_limit"}]}}}`
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("error body (-want +got):\n%s", diff)
	}
	// A server counts until its delete completes.
	if _, _, err := client.Server.DeleteWithResult(t.Context(), first.Server); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.Create(t.Context(), basicCreateOpts("three", nil)); !hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		t.Errorf("create while one is deleting error = %v; want resource_limit_exceeded", err)
	}
	clock.Advance(time.Minute)
	if _, _, err := client.Server.Create(t.Context(), basicCreateOpts("three", nil)); err != nil {
		t.Errorf("create after the delete completed: %v", err)
	}
	if infos, _ := s.Servers(""); len(infos) != 2 {
		t.Errorf("servers = %d; want 2", len(infos))
	}
}
