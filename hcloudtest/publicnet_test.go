package hcloudtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// createIP makes an unassigned Primary IP through the API.
func createIP(t *testing.T, client *hcloud.Client, name string, typ hcloud.PrimaryIPType, location string) *hcloud.PrimaryIP {
	t.Helper()
	res, _, err := client.PrimaryIP.Create(t.Context(), hcloud.PrimaryIPCreateOpts{Name: name, Type: typ, Location: location})
	if err != nil {
		t.Fatalf("PrimaryIP.Create(%q) error: %v", name, err)
	}
	return res.PrimaryIP
}

// TestDisabledVersionTakesNoPrimaryIP checks the reference's "if false, no
// IPv4 address will be attached" for a request that also names an IPv4
// (as `hcloud server create --without-ipv4 --primary-ipv4 x` sends): the
// server gets none and the IP stays free.
func TestDisabledVersionTakesNoPrimaryIP(t *testing.T) {
	_, client, _ := newFake(t)
	ctx := t.Context()
	spare := createIP(t, client, "spare", hcloud.PrimaryIPTypeIPv4, "fsn1")
	opts := basicCreateOpts("v6only", nil)
	opts.PublicNet = &hcloud.ServerCreatePublicNet{EnableIPv4: false, IPv4: spare, EnableIPv6: true}
	res := mustCreate(t, client, opts)
	if res.Server.PublicNet.IPv4.ID != 0 {
		t.Errorf("server IPv4 = %+v; want none (enable_ipv4 false)", res.Server.PublicNet.IPv4)
	}
	got, _, err := client.PrimaryIP.GetByID(ctx, spare.ID)
	if err != nil || got == nil || got.AssigneeID != 0 || got.AssigneeType != "unassigned" {
		t.Errorf("named IPv4 after the create = %+v, %v; want unassigned", got, err)
	}
}

// TestServerGoesWherePrimaryIPIs checks that a server created on an
// existing Primary IP without a location is placed in the IP's location,
// the only one the IP can be assigned in.
func TestServerGoesWherePrimaryIPIs(t *testing.T) {
	_, client, _ := newFake(t)
	ip := createIP(t, client, "north", hcloud.PrimaryIPTypeIPv4, "hel1")
	opts := basicCreateOpts("edge", nil)
	opts.Location = nil
	opts.PublicNet = &hcloud.ServerCreatePublicNet{EnableIPv4: true, IPv4: ip, EnableIPv6: true}
	res := mustCreate(t, client, opts)
	if res.Server.Location.Name != "hel1" || res.Server.PublicNet.IPv4.ID != ip.ID {
		t.Errorf("server in %s with IPv4 %d; want hel1 with Primary IP %d", res.Server.Location.Name, res.Server.PublicNet.IPv4.ID, ip.ID)
	}
	v6, _, err := client.PrimaryIP.GetByID(t.Context(), res.Server.PublicNet.IPv6.ID)
	if err != nil || v6 == nil || v6.Location.Name != "hel1" {
		t.Errorf("new IPv6 = %+v, %v; want one in hel1", v6, err)
	}
}

// TestRemovedDatacenterRefused checks that a create request with the
// datacenter property, removed from request bodies on 2026-07-01, is
// refused naming the field instead of quietly creating the resource
// elsewhere.
func TestRemovedDatacenterRefused(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	tests := []struct {
		name, path string
		body       any
	}{
		{"server", "/servers", map[string]any{"name": "old", "server_type": "cx23", "image": "ubuntu-24.04", "datacenter": "hel1-dc2"}},
		{"server with location", "/servers", map[string]any{"name": "old", "server_type": "cx23", "image": "ubuntu-24.04", "location": "hel1", "datacenter": "hel1-dc2"}},
		{"primary ip", "/primary_ips", map[string]any{"name": "old", "type": "ipv4", "datacenter": "hel1-dc2"}},
	}
	for _, tt := range tests {
		req, err := client.NewRequest(ctx, http.MethodPost, tt.path, jsonBody(t, tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req, nil)
		if resp == nil || resp.StatusCode != http.StatusUnprocessableEntity || !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
			t.Errorf("%s: POST %s with a datacenter = %d, %v; want 422 invalid_input", tt.name, tt.path, statusOf(resp), err)
			continue
		}
		var herr hcloud.Error
		if !errors.As(err, &herr) || !strings.Contains(herr.Message, "'datacenter'") {
			t.Errorf("%s: error %v names no datacenter field", tt.name, err)
		}
	}
	if got, _ := s.Servers(""); len(got) != 0 {
		t.Errorf("servers after the refused creates = %+v; want none", got)
	}
}

// TestActionsOfOneResource checks the per-resource action routes the
// reference has besides the per-kind ones: GET /servers/{id}/actions/{id}
// and GET /primary_ips/{id}/actions[/{id}] (PrimaryIP.Action.ListFor).
func TestActionsOfOneResource(t *testing.T) {
	s, client, clock := newFake(t)
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("acted", nil))
	if err := waitFor(t, client, clock, append(res.NextActions, res.Action)...); err != nil {
		t.Fatal(err)
	}
	off, _, err := client.Server.Poweroff(ctx, res.Server)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, client, clock, off); err != nil {
		t.Fatal(err)
	}
	ip := &hcloud.PrimaryIP{ID: res.Server.PublicNet.IPv4.ID}
	unassign, _, err := client.PrimaryIP.Unassign(ctx, ip.ID)
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := client.PrimaryIP.Action.ListFor(ctx, ip, hcloud.ActionListOpts{})
	if err != nil || len(list) != 1 || list[0].ID != unassign.ID {
		t.Errorf("PrimaryIP.Action.ListFor = %+v, %v; want the unassign action %d", list, err, unassign.ID)
	}
	srvPath := "/servers/" + strconv.FormatInt(res.Server.ID, 10)
	ipPath := "/primary_ips/" + strconv.FormatInt(ip.ID, 10)
	for _, path := range []string{srvPath + "/actions/" + strconv.FormatInt(off.ID, 10), ipPath + "/actions/" + strconv.FormatInt(unassign.ID, 10)} {
		if body := getRaw(t, s, path); !strings.Contains(body, `"id":`) || !strings.Contains(body, `"action"`) {
			t.Errorf("GET %s = %s; want the action", path, body)
		}
	}
	other := ipPath + "/actions/" + strconv.FormatInt(off.ID, 10)
	req, err := client.NewRequest(ctx, http.MethodGet, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Do(req, nil); resp == nil || resp.StatusCode != http.StatusNotFound || !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Errorf("GET %s (another resource's action) = %d, %v; want 404 not_found", other, statusOf(resp), err)
	}
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// statusOf is a response's HTTP status, 0 for none.
func statusOf(resp *hcloud.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
