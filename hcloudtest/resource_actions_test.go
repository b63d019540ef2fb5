package hcloudtest_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// TestServerActionEndpoints reads a server's actions through
// client.Server.Action, which uses GET /servers/actions/{id} and
// GET /servers/actions.
func TestServerActionEndpoints(t *testing.T) {
	_, client, _ := newFake(t)
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("acted", nil))
	got, _, err := client.Server.Action.GetByID(ctx, res.Action.ID)
	if err != nil || got == nil || got.ID != res.Action.ID || got.Command != "create_server" {
		t.Fatalf("Server.Action.GetByID(%d) = %+v, %v; want the create_server action", res.Action.ID, got, err)
	}
	ipAction, _, err := client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: "spare", Type: hcloud.PrimaryIPTypeIPv4, Location: "fsn1"})
	if err != nil {
		t.Fatal(err)
	}
	all, err := client.Server.Action.All(ctx, hcloud.ActionListOpts{})
	if err != nil || len(all) != 1+len(res.NextActions) {
		t.Fatalf("Server.Action.All = %d actions, %v; want %d", len(all), err, 1+len(res.NextActions))
	}
	running, _, err := client.Server.Action.List(ctx, hcloud.ActionListOpts{ID: []int64{res.Action.ID}, Status: []hcloud.ActionStatus{hcloud.ActionStatusRunning}})
	if err != nil || len(running) != 1 || running[0].ID != res.Action.ID {
		t.Errorf("Server.Action.List(id, running) = %+v, %v; want the create action", running, err)
	}
	if ipAction.Action != nil {
		t.Fatalf("a Primary IP created in a location has no action; got %+v", ipAction.Action)
	}
	if got, _, err := client.Server.Action.GetByID(ctx, 1); got != nil || err != nil {
		t.Errorf("Server.Action.GetByID(unknown) = %+v, %v; want nil, nil", got, err)
	}
}

// TestRemovedEndpoints checks the answers of endpoints the API removed:
// 410 deprecated_api_endpoint with the announcement, which hcloud-go
// hands over as an error instead of a nil result.
func TestRemovedEndpoints(t *testing.T) {
	_, client, _ := newFake(t)
	ctx := t.Context()
	check := func(name string, resp *hcloud.Response, err error) {
		t.Helper()
		var herr hcloud.Error
		if !errors.As(err, &herr) || herr.Code != hcloud.ErrorDeprecatedAPIEndpoint {
			t.Fatalf("%s: error = %v; want deprecated_api_endpoint", name, err)
		}
		if resp == nil || resp.StatusCode != http.StatusGone {
			t.Errorf("%s: response = %v; want 410", name, resp)
		}
		if d, ok := herr.Details.(hcloud.ErrorDetailsDeprecatedAPIEndpoint); !ok || d.Announcement == "" {
			t.Errorf("%s: details = %#v; want the announcement", name, herr.Details)
		}
	}
	//nolint:staticcheck // the deprecated client is what users still call
	dc, resp, err := client.Datacenter.GetByID(ctx, 1)
	if dc != nil {
		t.Errorf("Datacenter.GetByID = %+v; want nil", dc)
	}
	check("Datacenter.GetByID", resp, err)
	//nolint:staticcheck // the deprecated client is what users still call
	_, resp, err = client.Datacenter.List(ctx, hcloud.DatacenterListOpts{})
	check("Datacenter.List", resp, err)
	_, resp, err = client.Action.List(ctx, hcloud.ActionListOpts{})
	check("Action.List without id", resp, err)
}
