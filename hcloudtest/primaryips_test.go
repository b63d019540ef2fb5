package hcloudtest_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestServerPrimaryIPs checks that a server's public IPs are Primary IPs
// the client can read, assigned to the server, deleted with it when
// auto_delete is set and kept, unassigned, when it is not.
func TestServerPrimaryIPs(t *testing.T) {
	_, client, clock := newFake(t)
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("web", nil))
	pub := res.Server.PublicNet
	v4, _, err := client.PrimaryIP.GetByID(ctx, pub.IPv4.ID)
	if err != nil || v4 == nil {
		t.Fatalf("PrimaryIP.GetByID(%d) = %v, %v; want the server's IPv4", pub.IPv4.ID, v4, err)
	}
	if v4.AssigneeID != res.Server.ID || v4.AssigneeType != "server" || !v4.AutoDelete || v4.Type != hcloud.PrimaryIPTypeIPv4 || !v4.IP.Equal(pub.IPv4.IP) || v4.Location.Name != "fsn1" {
		t.Errorf("IPv4 Primary IP = %+v; want assigned to server %d, auto_delete, %s in fsn1", v4, res.Server.ID, pub.IPv4.IP)
	}
	v6, _, err := client.PrimaryIP.GetByID(ctx, pub.IPv6.ID)
	if err != nil || v6 == nil || v6.AssigneeID != res.Server.ID || v6.Type != hcloud.PrimaryIPTypeIPv6 || v6.Network.String() != pub.IPv6.Network.String() {
		t.Fatalf("IPv6 Primary IP = %+v, %v; want the server's network %v", v6, err, pub.IPv6.Network)
	}
	if _, _, err := client.PrimaryIP.Update(ctx, v6, hcloud.PrimaryIPUpdateOpts{AutoDelete: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	del, _, err := client.Server.DeleteWithResult(ctx, res.Server)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, client, clock, del.Action); err != nil {
		t.Fatal(err)
	}
	if got, _, err := client.PrimaryIP.GetByID(ctx, v4.ID); got != nil || err != nil {
		t.Errorf("IPv4 after the server's delete = %+v, %v; want gone (auto_delete)", got, err)
	}
	got, _, err := client.PrimaryIP.GetByID(ctx, v6.ID)
	if err != nil || got == nil || got.AssigneeID != 0 || got.AssigneeType != "unassigned" {
		t.Errorf("IPv6 after the server's delete = %+v, %v; want kept, unassigned", got, err)
	}
}

// TestServerWithoutIPv4 checks that a server created without IPv4 has no
// IPv4 Primary IP and renders ipv4 as null, as the API does.
func TestServerWithoutIPv4(t *testing.T) {
	s, client, _ := newFake(t)
	opts := basicCreateOpts("v6only", nil)
	opts.PublicNet = &hcloud.ServerCreatePublicNet{EnableIPv4: false, EnableIPv6: true}
	res := mustCreate(t, client, opts)
	if res.Server.PublicNet.IPv4.ID != 0 || res.Server.PublicNet.IPv6.ID == 0 {
		t.Errorf("public net = %+v; want IPv6 only", res.Server.PublicNet)
	}
	all, err := client.PrimaryIP.All(t.Context())
	if err != nil || len(all) != 1 || all[0].Type != hcloud.PrimaryIPTypeIPv6 {
		t.Errorf("PrimaryIP.All = %+v, %v; want the one IPv6", all, err)
	}
	body := getRaw(t, s, "/servers/"+strconv.FormatInt(res.Server.ID, 10))
	if !strings.Contains(body, `"ipv4":null`) || strings.Contains(body, `"ipv6":null`) {
		t.Errorf("GET /servers/{id} = %s; want \"ipv4\":null and an ipv6 object", body)
	}
}

// TestServerWithExistingPrimaryIP checks creating a server on a Primary
// IP made beforehand, and that an assigned IP cannot be taken twice.
func TestServerWithExistingPrimaryIP(t *testing.T) {
	_, client, _ := newFake(t)
	ctx := t.Context()
	created, resp, err := client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: "ingress", Type: hcloud.PrimaryIPTypeIPv4, Location: "fsn1"})
	if err != nil || resp.StatusCode != http.StatusCreated || created.Action != nil {
		t.Fatalf("PrimaryIP.Create = %+v, %v, %v; want 201 without an action", created, resp, err)
	}
	ip := created.PrimaryIP
	if ip.AssigneeID != 0 || ip.AutoDelete || ip.Location.Name != "fsn1" || ip.IP == nil {
		t.Errorf("created = %+v; want unassigned, no auto_delete, in fsn1, with an address", ip)
	}
	opts := basicCreateOpts("edge", nil)
	opts.PublicNet = &hcloud.ServerCreatePublicNet{EnableIPv4: true, IPv4: ip, EnableIPv6: true}
	res := mustCreate(t, client, opts)
	if res.Server.PublicNet.IPv4.ID != ip.ID || !res.Server.PublicNet.IPv4.IP.Equal(ip.IP) {
		t.Errorf("server IPv4 = %+v; want Primary IP %d (%s)", res.Server.PublicNet.IPv4, ip.ID, ip.IP)
	}
	opts.Name = "edge2"
	if _, _, err := client.Server.Create(ctx, opts); !hcloud.IsError(err, hcloud.ErrorCodePrimaryIPAssigned) {
		t.Errorf("second server on the same IP: error = %v; want primary_ip_assigned", err)
	}
	if _, _, err := client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: "ingress", Type: hcloud.PrimaryIPTypeIPv4, Location: "fsn1"}); !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Errorf("Create with a taken name: error = %v; want uniqueness_error", err)
	}
}

// TestPrimaryIPAssignUnassignDelete drives the Primary IP actions: they
// need the server off, and a deleted IP is gone.
func TestPrimaryIPAssignUnassignDelete(t *testing.T) {
	_, client, clock := newFake(t)
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("moving", nil))
	if err := waitFor(t, client, clock, append(res.NextActions, res.Action)...); err != nil {
		t.Fatal(err)
	}
	v4ID := res.Server.PublicNet.IPv4.ID
	if _, _, err := client.PrimaryIP.Unassign(ctx, v4ID); !hcloud.IsError(err, hcloud.ErrorCodeServerNotStopped) {
		t.Fatalf("Unassign from a running server: error = %v; want server_not_stopped", err)
	}
	off, _, err := client.Server.Poweroff(ctx, res.Server)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, client, clock, off); err != nil {
		t.Fatal(err)
	}
	a, _, err := client.PrimaryIP.Unassign(ctx, v4ID)
	if err != nil || a.Command != "unassign_primary_ip" {
		t.Fatalf("Unassign = %+v, %v; want an unassign_primary_ip action", a, err)
	}
	if err := waitFor(t, client, clock, a); err != nil {
		t.Fatal(err)
	}
	srv, _, _ := client.Server.GetByID(ctx, res.Server.ID)
	if srv.PublicNet.IPv4.ID != 0 {
		t.Errorf("server IPv4 after unassign = %+v; want none", srv.PublicNet.IPv4)
	}
	a, _, err = client.PrimaryIP.Assign(ctx, hcloud.PrimaryIPAssignOpts{ID: v4ID, AssigneeID: srv.ID, AssigneeType: "server"})
	if err != nil || a.Command != "assign_primary_ip" {
		t.Fatalf("Assign = %+v, %v; want an assign_primary_ip action", a, err)
	}
	if err := waitFor(t, client, clock, a); err != nil {
		t.Fatal(err)
	}
	srv, _, _ = client.Server.GetByID(ctx, res.Server.ID)
	if srv.PublicNet.IPv4.ID != v4ID {
		t.Errorf("server IPv4 after assign = %+v; want Primary IP %d", srv.PublicNet.IPv4, v4ID)
	}
	ip := &hcloud.PrimaryIP{ID: v4ID}
	resp, err := client.PrimaryIP.Delete(ctx, ip)
	if !hcloud.IsError(err, "must_be_unassigned") || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("Delete of an assigned IP = %v, %v; want 422 must_be_unassigned", resp, err)
	}
	if a, _, err = client.PrimaryIP.Unassign(ctx, v4ID); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, client, clock, a); err != nil {
		t.Fatal(err)
	}
	resp, err = client.PrimaryIP.Delete(ctx, ip)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("Delete = %v, %v; want 204", resp, err)
	}
	if got, _, err := client.PrimaryIP.GetByID(ctx, v4ID); got != nil || err != nil {
		t.Errorf("after Delete: GetByID = %+v, %v; want nil, nil", got, err)
	}
}

// TestPrimaryIPErrorStatuses checks the statuses of the reference's
// operation tables for Primary IPs at server create.
func TestPrimaryIPErrorStatuses(t *testing.T) {
	_, client, _ := newFake(t)
	ctx := t.Context()
	v6, _, err := client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: "six", Type: hcloud.PrimaryIPTypeIPv6, Location: "fsn1"})
	if err != nil {
		t.Fatal(err)
	}
	far, _, err := client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: "far", Type: hcloud.PrimaryIPTypeIPv4, Location: "hel1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		pub    hcloud.ServerCreatePublicNet
		code   hcloud.ErrorCode
		status int
	}{
		{"IPv6 given as IPv4", hcloud.ServerCreatePublicNet{EnableIPv4: true, IPv4: v6.PrimaryIP}, hcloud.ErrorCodePrimaryIPVersionMismatch, http.StatusPreconditionFailed},
		{"IP in another location", hcloud.ServerCreatePublicNet{EnableIPv4: true, IPv4: far.PrimaryIP}, hcloud.ErrorCodePrimaryIPDatacenterMismatch, http.StatusUnprocessableEntity},
	}
	for _, tt := range tests {
		opts := basicCreateOpts("s", nil)
		opts.PublicNet = &tt.pub
		_, resp, err := client.Server.Create(ctx, opts)
		if !hcloud.IsError(err, tt.code) || resp == nil || resp.StatusCode != tt.status {
			t.Errorf("%s: Create = %v, %v; want %d %s", tt.name, resp, err, tt.status, tt.code)
		}
	}
}

// TestPrimaryIPActionsLock checks that an assign or unassign action locks
// the Primary IP and the server until it finishes, as every action locks
// its resources: a second action on either is refused with 423 locked.
func TestPrimaryIPActionsLock(t *testing.T) {
	_, client, clock := newFake(t)
	ctx := t.Context()
	opts := basicCreateOpts("locking", nil)
	opts.StartAfterCreate = ptr(false)
	res := mustCreate(t, client, opts)
	if err := waitFor(t, client, clock, res.Action); err != nil {
		t.Fatal(err)
	}
	v4, v6 := res.Server.PublicNet.IPv4.ID, res.Server.PublicNet.IPv6.ID
	unassign, _, err := client.PrimaryIP.Unassign(ctx, v4)
	if err != nil {
		t.Fatal(err)
	}
	spare := createIP(t, client, "spare", hcloud.PrimaryIPTypeIPv4, "fsn1")
	refused := []struct {
		name string
		do   func() (*hcloud.Response, error)
	}{
		{"unassign the server's IPv6", func() (*hcloud.Response, error) {
			_, resp, err := client.PrimaryIP.Unassign(ctx, v6)
			return resp, err
		}},
		{"assign the IP being unassigned", func() (*hcloud.Response, error) {
			_, resp, err := client.PrimaryIP.Assign(ctx, hcloud.PrimaryIPAssignOpts{ID: v4, AssigneeID: res.Server.ID, AssigneeType: "server"})
			return resp, err
		}},
		{"assign another IP to the server", func() (*hcloud.Response, error) {
			_, resp, err := client.PrimaryIP.Assign(ctx, hcloud.PrimaryIPAssignOpts{ID: spare.ID, AssigneeID: res.Server.ID, AssigneeType: "server"})
			return resp, err
		}},
		{"delete the IP being unassigned", func() (*hcloud.Response, error) {
			return client.PrimaryIP.Delete(ctx, &hcloud.PrimaryIP{ID: v4})
		}},
	}
	for _, tt := range refused {
		if resp, err := tt.do(); !hcloud.IsError(err, hcloud.ErrorCodeLocked) || statusOf(resp) != http.StatusLocked {
			t.Errorf("%s while unassign runs = %d, %v; want 423 locked", tt.name, statusOf(resp), err)
		}
	}
	if err := waitFor(t, client, clock, unassign); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.PrimaryIP.Assign(ctx, hcloud.PrimaryIPAssignOpts{ID: spare.ID, AssigneeID: res.Server.ID, AssigneeType: "server"}); err != nil {
		t.Errorf("assign after the unassign finished: %v", err)
	}
}

// TestPrimaryIPAssignNeedsAssigneeType checks that an assign without
// assignee_type, which hcloud-go sends when PrimaryIPAssignOpts leaves it
// empty, is refused as the reference requires it (only a create may omit
// it).
func TestPrimaryIPAssignNeedsAssigneeType(t *testing.T) {
	_, client, clock := newFake(t)
	opts := basicCreateOpts("target", nil)
	opts.StartAfterCreate = ptr(false)
	opts.PublicNet = &hcloud.ServerCreatePublicNet{EnableIPv6: true}
	res := mustCreate(t, client, opts)
	if err := waitFor(t, client, clock, res.Action); err != nil {
		t.Fatal(err)
	}
	ip := createIP(t, client, "loose", hcloud.PrimaryIPTypeIPv4, "fsn1")
	_, resp, err := client.PrimaryIP.Assign(t.Context(), hcloud.PrimaryIPAssignOpts{ID: ip.ID, AssigneeID: res.Server.ID})
	if !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) || statusOf(resp) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "assignee_type") {
		t.Errorf("Assign without assignee_type = %d, %v; want 422 invalid_input naming assignee_type", statusOf(resp), err)
	}
}
