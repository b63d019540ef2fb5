package hcloudtest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestURLAndClient(t *testing.T) {
	s, client, _ := newFake(t)
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/v1") {
		t.Errorf("URL() = %q; want http://127.0.0.1:<port>/v1", s.URL())
	}
	if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
		t.Fatalf("List with the preconfigured client: %v", err)
	}
	wrong := s.Client(hcloud.WithToken("other"))
	_, resp, err := wrong.Server.List(t.Context(), hcloud.ServerListOpts{})
	if !hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("List with a wrong token = %v; want 401 unauthorized", err)
	}
}

func TestClientOptionsOverrideDefaults(t *testing.T) {
	s, _, _ := newFake(t)
	noRetry := s.Client(hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 0}))
	s.FailRequest("GET /servers", 1, hcloudtest.RequestFault{Code: "timeout"})
	if _, _, err := noRetry.Server.List(t.Context(), hcloud.ServerListOpts{}); !hcloud.IsError(err, hcloud.ErrorCodeTimeout) {
		t.Errorf("List error = %v; want timeout, not retried", err)
	}
	if got := s.Count("GET /servers"); got != 1 {
		t.Errorf("GET /servers = %d; want 1", got)
	}
}

func TestRawErrors(t *testing.T) {
	s, _, _ := newFake(t)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"unknown path", "GET", "/volumes", "", 404, `{"error":{"code":"not_found","message":"route not found","details":{}}}`},
		{"wrong method", "PATCH", "/servers", "", 405, `{"error":{"code":"method_not_allowed","message":"method PATCH not allowed","details":{}}}`},
		{"bad JSON", "POST", "/servers", "{", 400, `{"error":{"code":"json_error","message":"invalid JSON in request body: unexpected end of JSON input","details":{}}}`},
		{"bad id", "GET", "/servers/abc", "", 422, `{"error":{"code":"invalid_input","message":"invalid input in field 'id'","details":{"fields":[{"name":"id","messages":["must be a positive integer"]}]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, s.URL()+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+s.Token())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantBody, buf.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
		})
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestRequestLogAndCounts(t *testing.T) {
	s, client, clock := newFake(t)
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("logged", map[string]string{"a": "b"}))
	clock.Advance(time.Second)
	if _, _, err := client.Server.List(ctx, hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "a=b"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.GetByID(ctx, res.Server.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.GetByID(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Action.GetByID(ctx, res.Action.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.DeleteWithResult(ctx, res.Server); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"POST /servers":        1,
		"GET /servers":         1,
		"GET /servers/{id}":    2,
		"GET /actions/{id}":    1,
		"DELETE /servers/{id}": 1,
	}
	if diff := cmp.Diff(want, s.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	reqs := s.Requests()
	wantLog := []hcloudtest.Request{
		{Method: "POST", Path: "/servers", Template: "POST /servers", Status: 201, Token: hcloudtest.DefaultToken, Arrived: epoch, Time: epoch},
		{Method: "GET", Path: "/servers", Template: "GET /servers", Status: 200, Token: hcloudtest.DefaultToken, Arrived: epoch.Add(time.Second), Time: epoch.Add(time.Second)},
		{Method: "GET", Path: "/servers/100001", Template: "GET /servers/{id}", Status: 200, Token: hcloudtest.DefaultToken, Arrived: epoch.Add(time.Second), Time: epoch.Add(time.Second)},
		{Method: "GET", Path: "/servers/1", Template: "GET /servers/{id}", Status: 404, Token: hcloudtest.DefaultToken, Arrived: epoch.Add(time.Second), Time: epoch.Add(time.Second)},
	}
	if diff := cmp.Diff(wantLog, reqs[:4], cmpopts.IgnoreFields(hcloudtest.Request{}, "Query")); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
	if got := reqs[1].Query.Get("label_selector"); got != "a=b" {
		t.Errorf("logged label_selector = %q; want a=b", got)
	}
	s.ResetCounts()
	if got := s.Count("POST /servers"); got != 0 || len(s.Requests()) != 0 {
		t.Errorf("after ResetCounts: count %d, log %d; want 0, 0", got, len(s.Requests()))
	}
}

// TestTokens checks that a server made WithTokens accepts each of them,
// refuses others, and logs which token every request carried, so that a
// test with one token per client can attribute every request.
func TestTokens(t *testing.T) {
	s, _, _ := newFake(t, hcloudtest.WithTokens("replica-a", "replica-b"))
	ctx := t.Context()
	if got := s.Token(); got != "replica-a" {
		t.Errorf("Token() = %q; want the first, replica-a", got)
	}
	for _, token := range []string{"replica-a", "replica-b"} {
		if _, err := s.Client(hcloud.WithToken(token)).Server.All(ctx); err != nil {
			t.Errorf("List with token %s: %v; want success", token, err)
		}
	}
	for _, token := range []string{"other", hcloudtest.DefaultToken} {
		if _, err := s.Client(hcloud.WithToken(token)).Server.All(ctx); !hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
			t.Errorf("List with token %s: %v; want 401 unauthorized", token, err)
		}
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("%s %d", r.Token, r.Status))
	}
	want := []string{"replica-a 200", "replica-b 200", "other 401", hcloudtest.DefaultToken + " 401"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens and statuses in the log (-want +got):\n%s", diff)
	}
}

// TestArrivedBeforeLatency checks that Request.Arrived is taken before a
// latency fault delays the request and Time after.
func TestArrivedBeforeLatency(t *testing.T) {
	s := hcloudtest.NewServer()
	t.Cleanup(s.Close)
	s.SetLatency(50 * time.Millisecond)
	if _, err := s.Client().Server.All(t.Context()); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests logged; want 1", len(reqs))
	}
	if d := reqs[0].Time.Sub(reqs[0].Arrived); d < 50*time.Millisecond {
		t.Errorf("Time - Arrived = %s; want at least the latency, 50ms", d)
	}
}

func TestDirectStateAccess(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	id, err := s.AddServer(hcloudtest.ServerInfo{Labels: map[string]string{"hcloud/node-group": "p"}})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := s.ServerByID(id)
	if !ok {
		t.Fatal("ServerByID: not found")
	}
	wantInfo := hcloudtest.ServerInfo{
		ID: id, Name: "server-100001", Status: hcloud.ServerStatusRunning, ServerType: "cx23", Location: "fsn1",
		ImageID: 161547269, Labels: map[string]string{"hcloud/node-group": "p"}, Created: epoch,
		PublicIPv4: "198.18.0.1", PublicIPv6: "2001:db8:1::/64",
	}
	if diff := cmp.Diff(wantInfo, info, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("AddServer defaults (-want +got):\n%s", diff)
	}
	_, err = s.AddServer(hcloudtest.ServerInfo{Name: "server-100001", ServerType: "cx11", Location: "mars", Networks: []int64{9}})
	if err == nil {
		t.Fatal("AddServer with bad fields = nil error")
	}
	for _, want := range []string{`"server-100001" is already used`, `server type "cx11"`, `location "mars"`, "network 9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("AddServer error %q does not mention %s", err, want)
		}
	}
	if err := s.SetServerStatus(id, hcloud.ServerStatusMigrating); err != nil {
		t.Fatal(err)
	}
	srv, _, _ := client.Server.GetByID(ctx, id)
	if srv.Status != hcloud.ServerStatusMigrating {
		t.Errorf("status = %q; want migrating", srv.Status)
	}
	if err := s.SetServerStatus(1, hcloud.ServerStatusOff); err == nil {
		t.Error("SetServerStatus(1) = nil; want an error")
	}
	if !s.DeleteServerNow(id) || s.DeleteServerNow(id) {
		t.Error("DeleteServerNow: want true, then false")
	}
	if srv, _, _ := client.Server.GetByID(ctx, id); srv != nil {
		t.Errorf("server after DeleteServerNow = %+v; want gone", srv)
	}
	if _, err := s.Servers("a in ("); err == nil {
		t.Error("Servers with a bad selector = nil error")
	}
}

func TestUpdateServer(t *testing.T) {
	s, client, _ := newFake(t)
	id, _ := s.AddServer(hcloudtest.ServerInfo{Name: "old"})
	if _, err := s.AddServer(hcloudtest.ServerInfo{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	srv, _, err := client.Server.Update(t.Context(), &hcloud.Server{ID: id}, hcloud.ServerUpdateOpts{Name: "new", Labels: map[string]string{"x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Name != "new" || srv.Labels["x"] != "y" {
		t.Errorf("updated = %s %v; want new {x:y}", srv.Name, srv.Labels)
	}
	if got, _, _ := client.Server.GetByName(t.Context(), "old"); got != nil {
		t.Error("old name still resolves")
	}
	_, _, err = client.Server.Update(t.Context(), &hcloud.Server{ID: id}, hcloud.ServerUpdateOpts{Name: "other"})
	if !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Errorf("rename to a taken name error = %v; want uniqueness_error", err)
	}
}
