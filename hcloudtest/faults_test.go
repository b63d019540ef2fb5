package hcloudtest_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestFailRequest(t *testing.T) {
	tests := []struct {
		name        string
		nth         int
		fault       hcloudtest.RequestFault
		wantCode    hcloud.ErrorCode // empty: a non-JSON error
		wantStatus  int
		wantServers int
		wantPosts   int
	}{
		{
			name:  "second create fails with server_error",
			nth:   2,
			fault: hcloudtest.RequestFault{Code: "server_error", Message: "boom"},
			// The first create of the test succeeds; the second fails.
			wantCode: hcloud.ErrorCodeServerError, wantStatus: http.StatusInternalServerError,
			wantServers: 1, wantPosts: 2,
		},
		{
			name:     "custom status",
			nth:      1,
			fault:    hcloudtest.RequestFault{Code: "service_error", Status: http.StatusTeapot},
			wantCode: hcloud.ErrorCodeServiceError, wantStatus: http.StatusTeapot,
			wantServers: 0, wantPosts: 1,
		},
		{
			name:       "plain 503",
			nth:        1,
			fault:      hcloudtest.RequestFault{Status: http.StatusServiceUnavailable},
			wantStatus: http.StatusServiceUnavailable, wantServers: 0, wantPosts: 1,
		},
		{
			// hcloud-go retries timeout, re-sending the same name: the
			// lost first response turns into uniqueness_error.
			name:     "lost response then retry",
			nth:      1,
			fault:    hcloudtest.RequestFault{Code: "timeout", AfterEffect: true},
			wantCode: hcloud.ErrorCodeUniquenessError, wantStatus: http.StatusConflict,
			wantServers: 1, wantPosts: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, _ := newFake(t)
			s.FailRequest("POST /servers", tt.nth, tt.fault)
			var err error
			var resp *hcloud.Response
			for i := range tt.nth {
				_, resp, err = client.Server.Create(t.Context(), basicCreateOpts("n"+string(rune('a'+i)), nil))
			}
			if tt.wantCode != "" && !hcloud.IsError(err, tt.wantCode) {
				t.Fatalf("Create error = %v; want code %s", err, tt.wantCode)
			}
			if tt.wantCode == "" && !errors.Is(err, hcloud.ErrStatusCode) {
				t.Fatalf("Create error = %v; want hcloud.ErrStatusCode", err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("HTTP status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if infos, _ := s.Servers(""); len(infos) != tt.wantServers {
				t.Errorf("servers = %d; want %d", len(infos), tt.wantServers)
			}
			if got := s.Count("POST /servers"); got != tt.wantPosts {
				t.Errorf("POST /servers = %d; want %d", got, tt.wantPosts)
			}
		})
	}
}

func TestFailRequestIsRetriedWhenRetryable(t *testing.T) {
	s, client, _ := newFake(t)
	s.FailRequest("GET /servers", 1, hcloudtest.RequestFault{Status: http.StatusBadGateway})
	s.FailRequest("GET /servers", 1, hcloudtest.RequestFault{Code: "conflict"})
	if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
		t.Fatalf("List: %v; want success after retries", err)
	}
	if got := s.Count("GET /servers"); got != 3 {
		t.Errorf("GET /servers = %d; want 3 (two failures, one success)", got)
	}
}

func TestDropConnection(t *testing.T) {
	tests := []struct {
		name        string
		afterEffect bool
		wantServers int
	}{
		{"before the create", false, 0},
		{"after the create", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, _ := newFake(t)
			s.DropConnection("POST /servers", 1, tt.afterEffect)
			_, _, err := client.Server.Create(t.Context(), basicCreateOpts("dropped", nil))
			var herr hcloud.Error
			if err == nil || errors.As(err, &herr) {
				t.Fatalf("Create error = %v; want a connection error", err)
			}
			if infos, _ := s.Servers(""); len(infos) != tt.wantServers {
				t.Errorf("servers = %d; want %d", len(infos), tt.wantServers)
			}
			reqs := s.Requests()
			if len(reqs) != 1 || reqs[0].Status != 0 {
				t.Errorf("request log = %+v; want one dropped request (status 0)", reqs)
			}
			// The next request is served normally.
			if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
				t.Errorf("List after the drop: %v", err)
			}
		})
	}
}

func TestDroppedGetIsResentByTheTransport(t *testing.T) {
	s, client, _ := newFake(t)
	// Open a keep-alive connection first; the transport resends a GET only
	// on a reused connection.
	if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
		t.Fatal(err)
	}
	s.DropConnection("GET /servers", 1, false)
	if _, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{}); err != nil {
		t.Fatalf("List after a dropped GET: %v; want the transport's resend to succeed", err)
	}
	var statuses []int
	for _, r := range s.Requests() {
		statuses = append(statuses, r.Status)
	}
	if diff := cmp.Diff([]int{200, 0, 200}, statuses); diff != "" {
		t.Errorf("logged statuses (-want +got):\n%s", diff)
	}
}

func TestSetUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		serverType string
		location   string
		wantFail   map[[2]string]bool
	}{
		{"type anywhere", "cx23", "", map[[2]string]bool{{"cx23", "fsn1"}: true, {"cx23", "nbg1"}: true}},
		{"location for any type", "", "fsn1", map[[2]string]bool{{"cx23", "fsn1"}: true, {"cx33", "fsn1"}: true}},
		{"one pair", "cx23", "fsn1", map[[2]string]bool{{"cx23", "fsn1"}: true}},
		{"everything", "", "", map[[2]string]bool{{"cx23", "fsn1"}: true, {"cx23", "nbg1"}: true, {"cx33", "fsn1"}: true, {"cx33", "nbg1"}: true}},
	}
	pairs := [][2]string{{"cx23", "fsn1"}, {"cx23", "nbg1"}, {"cx33", "fsn1"}, {"cx33", "nbg1"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, _ := newFake(t)
			s.SetUnavailable(tt.serverType, tt.location, true)
			got := map[[2]string]bool{}
			for i, p := range pairs {
				opts := basicCreateOpts("u"+string(rune('a'+i)), nil)
				opts.ServerType = &hcloud.ServerType{Name: p[0]}
				opts.Location = &hcloud.Location{Name: p[1]}
				_, resp, err := client.Server.Create(t.Context(), opts)
				switch {
				case hcloud.IsError(err, hcloud.ErrorCodeResourceUnavailable):
					got[p] = true
					if resp.StatusCode != http.StatusPreconditionFailed {
						t.Errorf("%v: status %d; want 412", p, resp.StatusCode)
					}
				case err != nil:
					t.Errorf("%v: unexpected error %v", p, err)
				}
			}
			if diff := cmp.Diff(tt.wantFail, got); diff != "" {
				t.Errorf("failed creates (-want +got):\n%s", diff)
			}
			s.SetUnavailable(tt.serverType, tt.location, false)
			if _, _, err := client.Server.Create(t.Context(), basicCreateOpts("after", nil)); err != nil {
				t.Errorf("create after lifting: %v", err)
			}
		})
	}
}

func TestSetLatency(t *testing.T) {
	s, client, _ := newFake(t)
	const d = 100 * time.Millisecond
	s.SetLatency(d)
	start := time.Now()
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if elapsed < d {
		t.Errorf("%d requests took %v; want at least %v", n, elapsed, d)
	}
	// Latency is spent before the state lock, so requests overlap.
	if elapsed >= n*d {
		t.Errorf("%d concurrent requests took %v; want well under %v", n, elapsed, n*d)
	}
}

func TestCloseWaitsForRequestsAndCutsLatencyShort(t *testing.T) {
	s := hcloudtest.NewServer()
	client := s.Client()
	s.SetLatency(time.Minute)
	done := make(chan error, 1)
	go func() {
		_, _, err := client.Server.List(t.Context(), hcloud.ServerListOpts{})
		done <- err
	}()
	// Close must find the request inside the handler, sleeping its
	// latency: before that, it is not outstanding and may be refused.
	for deadline := time.Now().Add(10 * time.Second); s.ActiveRequests() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the List request did not reach the server")
		}
	}
	start := time.Now()
	s.Close()
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Close took %v; want the latency cut short", elapsed)
	}
	// Close let the outstanding request finish with a normal answer.
	if err := <-done; err != nil {
		t.Errorf("in-flight List error = %v; want it answered before Close returned", err)
	}
	if got := s.Count("GET /servers"); got != 1 {
		t.Errorf("GET /servers = %d; want 1", got)
	}
}

func TestSetOutage(t *testing.T) {
	s, client, _ := newFake(t)
	s.SetOutage(
		hcloudtest.RequestFault{Code: "server_error"},
		hcloudtest.RequestFault{Code: "timeout"},
	)
	_, _, errTypes := client.ServerType.List(t.Context(), hcloud.ServerTypeListOpts{})
	_, _, errImage := client.Image.GetByID(t.Context(), 1)
	_, _, errServers := client.Server.List(t.Context(), hcloud.ServerListOpts{})
	// hcloud-go sends a request again after timeout, which then meets
	// the next fault of the cycle.
	for _, c := range []struct {
		what string
		err  error
	}{
		{"GET /server_types", errTypes},
		{"GET /images/{id}", errImage},
		{"GET /servers", errServers},
	} {
		if !hcloud.IsError(c.err, hcloud.ErrorCodeServerError, hcloud.ErrorCodeTimeout) {
			t.Errorf("%s during the outage: error = %v; want server_error or timeout", c.what, c.err)
		}
	}
	if got := s.Count("GET /images/{id}"); got != 2 {
		t.Errorf("GET /images/{id} was sent %d times; want 2 (timeout, then server_error)", got)
	}

	s.SetOutage()
	if _, _, err := client.ServerType.List(t.Context(), hcloud.ServerTypeListOpts{}); err != nil {
		t.Errorf("GET /server_types after the outage: %v", err)
	}
}

func TestDeleteImage(t *testing.T) {
	s, client, _ := newFake(t)
	id, err := s.AddSnapshot("v1", hcloud.ArchitectureX86, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.DeleteImage(id) || s.DeleteImage(id) {
		t.Fatal("DeleteImage() of an image = false or of a deleted one = true")
	}
	if img, _, err := client.Image.GetByID(t.Context(), id); img != nil || err != nil {
		t.Errorf("GetByID(deleted image) = %v, %v; want nil, nil", img, err)
	}
	_, _, err = client.Server.Create(t.Context(), hcloud.ServerCreateOpts{
		Name: "s1", ServerType: &hcloud.ServerType{Name: "cx23"}, Image: &hcloud.Image{ID: id},
		Location: &hcloud.Location{Name: "fsn1"},
	})
	if !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
		t.Errorf("Create() with a deleted image: error = %v; want invalid_input", err)
	}
}

// An endpoint's outage fails every request of that endpoint, the faults
// in turn, while the others answer, until it is lifted.
func TestSetEndpointOutage(t *testing.T) {
	s, client, _ := newFake(t, hcloudtest.WithRateLimit(0, 0))
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("s1", nil))
	s.SetEndpointOutage("GET /actions",
		hcloudtest.RequestFault{Code: "server_error"},
		hcloudtest.RequestFault{Code: "rate_limit_exceeded"})
	for range 3 {
		if _, _, err := client.Action.List(ctx, hcloud.ActionListOpts{ID: []int64{res.Action.ID}}); err == nil {
			t.Error("GET /actions during its outage succeeded")
		}
	}
	// Every request (hcloud-go's retries too) failed, with the faults in
	// turn.
	var statuses []int
	for _, r := range s.Requests() {
		if r.Template == "GET /actions" {
			statuses = append(statuses, r.Status)
		}
	}
	if len(statuses) < 3 {
		t.Fatalf("GET /actions answered %v; want at least 3 requests", statuses)
	}
	for i, got := range statuses {
		if want := []int{http.StatusInternalServerError, http.StatusTooManyRequests}[i%2]; got != want {
			t.Errorf("GET /actions #%d during its outage answered %d; want %d", i+1, got, want)
		}
	}
	if _, _, err := client.Server.GetByID(ctx, res.Server.ID); err != nil {
		t.Errorf("GET /servers/{id} during the outage of GET /actions: %v", err)
	}
	if _, _, err := client.Server.DeleteWithResult(ctx, res.Server); err != nil {
		t.Errorf("DELETE /servers/{id} during the outage of GET /actions: %v", err)
	}
	s.SetEndpointOutage("GET /actions")
	if _, _, err := client.Action.List(ctx, hcloud.ActionListOpts{ID: []int64{res.Action.ID}}); err != nil {
		t.Errorf("GET /actions after the outage: %v", err)
	}
}

// A held request waits until released while later requests of the same
// endpoint are answered; then it is answered as usual.
func TestHoldRequest(t *testing.T) {
	s, client, _ := newFake(t, hcloudtest.WithRateLimit(0, 0))
	ctx := t.Context()
	res := mustCreate(t, client, basicCreateOpts("s1", nil))
	hold := s.HoldRequest("GET /servers/{id}", 1)
	held := make(chan error, 1)
	go func() {
		_, _, err := client.Server.GetByID(ctx, res.Server.ID)
		held <- err
	}()
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the held request did not arrive")
	}
	if _, _, err := client.Server.GetByID(ctx, res.Server.ID); err != nil {
		t.Fatalf("a request after the held one: %v", err)
	}
	select {
	case err := <-held:
		t.Fatalf("the held request returned (%v) before its release", err)
	default:
	}
	hold.Release()
	hold.Release()
	if err := <-held; err != nil {
		t.Errorf("the held request after its release: %v", err)
	}
	if got := s.Count("GET /servers/{id}"); got != 2 {
		t.Errorf("GET /servers/{id} = %d; want 2", got)
	}
}
