package hcloudtest_test

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestCreateServerWithEveryOption(t *testing.T) {
	s, client, clock := newFake(t)
	ctx := t.Context()
	keyID, err := s.AddSSHKey(hcloudtest.SSHKey{Name: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	netID, err := s.AddNetwork(hcloudtest.Network{
		Name: "k8s", IPRange: "10.0.0.0/16",
		Subnets: []hcloudtest.Subnet{{IPRange: "10.0.1.0/24", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fwID, err := s.AddFirewall(hcloudtest.Firewall{Name: "nodes"})
	if err != nil {
		t.Fatal(err)
	}
	pgID, err := s.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "spread"})
	if err != nil {
		t.Fatal(err)
	}

	res := mustCreate(t, client, hcloud.ServerCreateOpts{
		Name:             "pool1-abc",
		ServerType:       &hcloud.ServerType{Name: "cax11"},
		Image:            &hcloud.Image{Name: "ubuntu-24.04"},
		Location:         &hcloud.Location{Name: "nbg1"},
		UserData:         "#cloud-config\n",
		Labels:           map[string]string{"hcloud/node-group": "pool1"},
		SSHKeys:          []*hcloud.SSHKey{{ID: keyID}},
		Networks:         []*hcloud.Network{{ID: netID}},
		Firewalls:        []*hcloud.ServerCreateFirewall{{Firewall: hcloud.Firewall{ID: fwID}}},
		PlacementGroup:   &hcloud.PlacementGroup{ID: pgID},
		PublicNet:        &hcloud.ServerCreatePublicNet{EnableIPv4: false, EnableIPv6: true},
		StartAfterCreate: ptr(true),
	})

	if got, want := res.Server.Status, hcloud.ServerStatusInitializing; got != want {
		t.Errorf("created server status = %q; want %q", got, want)
	}
	if res.RootPassword != "" {
		t.Errorf("root password = %q; want none when an SSH key is given", res.RootPassword)
	}
	if got, want := res.Action.Command, "create_server"; got != want {
		t.Errorf("action command = %q; want %q", got, want)
	}
	var next []string
	for _, a := range res.NextActions {
		next = append(next, a.Command)
	}
	if diff := cmp.Diff([]string{"attach_to_network", "start_server"}, next); diff != "" {
		t.Errorf("next actions (-want +got):\n%s", diff)
	}
	srv := res.Server
	got := map[string]any{
		"type":      srv.ServerType.Name,
		"arch":      string(srv.ServerType.Architecture),
		"location":  srv.Location.Name,
		"image":     srv.Image.Name,
		"imageArch": string(srv.Image.Architecture),
		"labels":    srv.Labels,
		"ipv4":      srv.PublicNet.IPv4.IsUnspecified(),
		"ipv6set":   srv.PublicNet.IPv6.IP != nil,
		"firewalls": len(srv.PublicNet.Firewalls),
		"privnet":   len(srv.PrivateNet),
		"privIP":    srv.PrivateNet[0].IP.String(),
		"pg":        srv.PlacementGroup.ID,
	}
	want := map[string]any{
		"type": "cax11", "arch": "arm", "location": "nbg1", "image": "ubuntu-24.04", "imageArch": "arm",
		"labels": map[string]string{"hcloud/node-group": "pool1"}, "ipv4": true, "ipv6set": true,
		"firewalls": 1, "privnet": 1, "privIP": "10.0.1.1", "pg": pgID,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created server (-want +got):\n%s", diff)
	}

	if err := waitFor(t, client, clock, append([]*hcloud.Action{res.Action}, res.NextActions...)...); err != nil {
		t.Fatalf("WaitFor: %v", err)
	}
	after, _, err := client.Server.GetByID(ctx, srv.ID)
	if err != nil || after == nil {
		t.Fatalf("GetByID(%d) = %v, %v", srv.ID, after, err)
	}
	if got, want := after.Status, hcloud.ServerStatusRunning; got != want {
		t.Errorf("status after actions = %q; want %q", got, want)
	}
	infos, err := s.Servers("hcloud/node-group=pool1")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].UserData != "#cloud-config\n" || infos[0].SSHKeys[0] != keyID {
		t.Errorf("Servers() = %+v; want the one server with its user data and key", infos)
	}
}

func TestCreateWithoutStartEndsOff(t *testing.T) {
	_, client, clock := newFake(t)
	opts := basicCreateOpts("stopped", nil)
	opts.StartAfterCreate = ptr(false)
	res := mustCreate(t, client, opts)
	if len(res.NextActions) != 0 {
		t.Errorf("next actions = %d; want 0 without start", len(res.NextActions))
	}
	if res.RootPassword == "" {
		t.Error("root password is empty; want one when no SSH key is given")
	}
	if err := waitFor(t, client, clock, res.Action); err != nil {
		t.Fatal(err)
	}
	srv, _, err := client.Server.GetByID(t.Context(), res.Server.ID)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Status != hcloud.ServerStatusOff {
		t.Errorf("status = %q; want off", srv.Status)
	}
}

func TestStatusFollowsTheClock(t *testing.T) {
	s, client, clock := newFake(t,
		hcloudtest.WithActionDuration("create_server", 10*time.Second),
		hcloudtest.WithActionDuration("start_server", 5*time.Second),
		hcloudtest.WithActionDuration("delete_server", 3*time.Second))
	res := mustCreate(t, client, basicCreateOpts("clocked", nil))
	id := res.Server.ID
	steps := []struct {
		advance time.Duration
		want    hcloud.ServerStatus
	}{
		{0, hcloud.ServerStatusInitializing},
		{9 * time.Second, hcloud.ServerStatusInitializing},
		{1 * time.Second, hcloud.ServerStatusStarting},
		{5 * time.Second, hcloud.ServerStatusRunning},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		srv, _, err := client.Server.GetByID(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if srv.Status != st.want {
			t.Errorf("step %d: status = %q; want %q", i, srv.Status, st.want)
		}
	}
	del, _, err := client.Server.DeleteWithResult(t.Context(), &hcloud.Server{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if del.Action.Command != "delete_server" || del.Action.Status != hcloud.ActionStatusRunning {
		t.Errorf("delete action = %s/%s; want delete_server/running", del.Action.Command, del.Action.Status)
	}
	srv, _, _ := client.Server.GetByID(t.Context(), id)
	if srv == nil || srv.Status != hcloud.ServerStatusDeleting {
		t.Fatalf("server after delete = %+v; want status deleting", srv)
	}
	clock.Advance(3 * time.Second)
	srv, _, err = client.Server.GetByID(t.Context(), id)
	if err != nil || srv != nil {
		t.Errorf("GetByID after the delete action = %v, %v; want nil, nil", srv, err)
	}
	a, _, err := client.Action.GetByID(t.Context(), del.Action.ID)
	if err != nil || a.Status != hcloud.ActionStatusSuccess {
		t.Errorf("delete action = %+v, %v; want success", a, err)
	}
	if infos, _ := s.Servers(""); len(infos) != 0 {
		t.Errorf("Servers() = %+v; want none", infos)
	}
}

func TestListServersSelectors(t *testing.T) {
	s, client, _ := newFake(t)
	servers := map[string]map[string]string{
		"a": {"pool": "a", "env": "prod"},
		"b": {"pool": "b", "env": "prod"},
		"c": {"pool": "c", "env": "dev", "legacy": ""},
		"d": {},
	}
	for name, labels := range servers {
		if _, err := s.AddServer(hcloudtest.ServerInfo{Name: name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		selector string
		want     []string
	}{
		{"", []string{"a", "b", "c", "d"}},
		{"pool", []string{"a", "b", "c"}},
		{"!pool", []string{"d"}},
		{"pool=a", []string{"a"}},
		{"pool==b", []string{"b"}},
		{"env!=prod", []string{"c", "d"}},
		{"pool in (a,c)", []string{"a", "c"}},
		{"pool notin (a, c)", []string{"b", "d"}},
		{"env=prod,pool!=a", []string{"b"}},
		{"legacy", []string{"c"}},
		{"legacy=", []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			list, err := client.Server.AllWithOpts(t.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: tt.selector}})
			if err != nil {
				t.Fatalf("AllWithOpts(%q): %v", tt.selector, err)
			}
			var got []string
			for _, srv := range list {
				got = append(got, srv.Name)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AllWithOpts(%q) (-want +got):\n%s", tt.selector, diff)
			}
		})
	}
}

func TestListServersRejectsBadSelectors(t *testing.T) {
	_, client, _ := newFake(t)
	for _, sel := range []string{"a=b,", "k in (a", "k in a,b)", "=v", "k=v=w", "k ~ v", "!k=v", ",", "k in ()x"} {
		t.Run(sel, func(t *testing.T) {
			_, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: sel}})
			if !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
				t.Errorf("List(label_selector=%q) error = %v; want invalid_input", sel, err)
			}
		})
	}
}

func TestListServersPaginationAndSort(t *testing.T) {
	s, client, _ := newFake(t)
	const n = 120
	for i := range n {
		if _, err := s.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("node-%03d", i), Labels: map[string]string{"pool": "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	s.ResetCounts()
	all, err := client.Server.AllWithOpts(t.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "pool=p"}, Sort: []string{"name:desc"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("AllWithOpts returned %d servers; want %d", len(all), n)
	}
	if all[0].Name != "node-119" || all[n-1].Name != "node-000" {
		t.Errorf("sort name:desc gave first %q last %q; want node-119, node-000", all[0].Name, all[n-1].Name)
	}
	if got, want := s.Count("GET /servers"), 3; got != want {
		t.Errorf("GET /servers count = %d; want %d (pages of 50)", got, want)
	}

	page, resp, err := client.Server.List(t.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{Page: 2, PerPage: 100}})
	if err != nil {
		t.Fatal(err)
	}
	wantPage := hcloud.Pagination{Page: 2, PerPage: 50, PreviousPage: 1, NextPage: 3, LastPage: 3, TotalEntries: n}
	if diff := cmp.Diff(wantPage, *resp.Meta.Pagination); diff != "" {
		t.Errorf("pagination (-want +got):\n%s", diff)
	}
	if len(page) != 50 {
		t.Errorf("page size = %d; want 50 (per_page capped)", len(page))
	}
	_, resp, err = client.Server.List(t.Context(), hcloud.ServerListOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Meta.Pagination.PerPage; got != 25 {
		t.Errorf("default per_page = %d; want 25", got)
	}
	_, _, err = client.Server.List(t.Context(), hcloud.ServerListOpts{Sort: []string{"colour"}})
	if !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
		t.Errorf("sort=colour error = %v; want invalid_input", err)
	}
}

func TestGetServerByName(t *testing.T) {
	s, client, _ := newFake(t)
	id, err := s.AddServer(hcloudtest.ServerInfo{Name: "named"})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := client.Server.GetByName(t.Context(), "named")
	if err != nil || srv == nil || srv.ID != id {
		t.Fatalf("GetByName = %+v, %v; want server %d", srv, err, id)
	}
	srv, _, err = client.Server.GetByName(t.Context(), "missing")
	if err != nil || srv != nil {
		t.Errorf("GetByName(missing) = %+v, %v; want nil, nil", srv, err)
	}
}

func TestCreateServerErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*hcloud.ServerCreateOpts)
		code   hcloud.ErrorCode
		status int
	}{
		{"unknown server type", func(o *hcloud.ServerCreateOpts) { o.ServerType = &hcloud.ServerType{Name: "cx11"} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"unknown image", func(o *hcloud.ServerCreateOpts) { o.Image = &hcloud.Image{Name: "windows"} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"unknown location", func(o *hcloud.ServerCreateOpts) { o.Location = &hcloud.Location{Name: "mars1"} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"arm type outside the EU", func(o *hcloud.ServerCreateOpts) {
			o.ServerType = &hcloud.ServerType{Name: "cax11"}
			o.Location = &hcloud.Location{Name: "ash"}
		}, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"bad name", func(o *hcloud.ServerCreateOpts) { o.Name = "under_score" }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"bad label", func(o *hcloud.ServerCreateOpts) { o.Labels = map[string]string{"-x": "y"} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"unknown ssh key", func(o *hcloud.ServerCreateOpts) { o.SSHKeys = []*hcloud.SSHKey{{ID: 1}} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"unknown network", func(o *hcloud.ServerCreateOpts) { o.Networks = []*hcloud.Network{{ID: 1}} }, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"taken name", func(o *hcloud.ServerCreateOpts) { o.Name = "taken" }, hcloud.ErrorCodeUniquenessError, http.StatusConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, _ := newFake(t)
			if _, err := s.AddServer(hcloudtest.ServerInfo{Name: "taken"}); err != nil {
				t.Fatal(err)
			}
			opts := basicCreateOpts("new", nil)
			tt.mutate(&opts)
			_, resp, err := client.Server.Create(t.Context(), opts)
			if !hcloud.IsError(err, tt.code) {
				t.Fatalf("Create error = %v; want code %s", err, tt.code)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("HTTP status = %d; want %d", resp.StatusCode, tt.status)
			}
			if infos, _ := s.Servers(""); len(infos) != 1 {
				t.Errorf("servers after failed create = %d; want 1", len(infos))
			}
		})
	}
}

func TestCreateInvalidInputListsEveryField(t *testing.T) {
	_, client, _ := newFake(t)
	opts := basicCreateOpts("bad_name", map[string]string{"hetzner.cloud/x": "y"})
	opts.UserData = string(make([]byte, 33*1024))
	_, _, err := client.Server.Create(t.Context(), opts)
	var herr hcloud.Error
	if !errors.As(err, &herr) || herr.Code != hcloud.ErrorCodeInvalidInput {
		t.Fatalf("error = %v; want invalid_input", err)
	}
	details, ok := herr.Details.(hcloud.ErrorDetailsInvalidInput)
	if !ok {
		t.Fatalf("details = %#v; want ErrorDetailsInvalidInput", herr.Details)
	}
	var fields []string
	for _, f := range details.Fields {
		fields = append(fields, f.Name)
	}
	if diff := cmp.Diff([]string{"name", "user_data", "labels"}, fields); diff != "" {
		t.Errorf("invalid fields (-want +got):\n%s", diff)
	}
}

func TestNameUniqueUnderConcurrentCreates(t *testing.T) {
	s, client, _ := newFake(t)
	const n = 50
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := client.Server.Create(t.Context(), basicCreateOpts("same", nil))
			errs <- err
		}()
	}
	ok, unique := 0, 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case hcloud.IsError(err, hcloud.ErrorCodeUniquenessError):
			unique++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || unique != n-1 {
		t.Errorf("creates: %d succeeded, %d uniqueness_error; want 1 and %d", ok, unique, n-1)
	}
	if infos, _ := s.Servers(""); len(infos) != 1 {
		t.Errorf("servers = %d; want 1", len(infos))
	}
}
