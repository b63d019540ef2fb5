package hcloudtest_test

import (
	"net/http"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestStatusForCodeFollowsReference checks every code of the API
// reference's error table against the status the fake sends with it.
func TestStatusForCodeFollowsReference(t *testing.T) {
	reference := map[string]int{
		"json_error":              400,
		"unauthorized":            401,
		"forbidden":               403,
		"maintenance":             403,
		"resource_limit_exceeded": 403,
		"not_found":               404,
		"method_not_allowed":      405,
		"uniqueness_error":        409,
		"conflict":                409,
		"deprecated_api_endpoint": 410,
		"resource_unavailable":    412,
		"invalid_input":           422,
		"service_error":           422,
		"unsupported_error":       422,
		"locked":                  423,
		"protected":               423,
		"rate_limit_exceeded":     429,
		"server_error":            500,
		"unavailable":             503,
		"timeout":                 504,
	}
	for code, want := range reference {
		if got := hcloudtest.StatusForCode(code); got != want {
			t.Errorf("StatusForCode(%q) = %d; want %d (API reference)", code, got, want)
		}
	}
}

// TestErrorStatusesThroughClient provokes each error the fake models with
// a real request and checks the status hcloud-go hands to its caller, as
// code that inspects resp.StatusCode sees it.
func TestErrorStatusesThroughClient(t *testing.T) {
	tests := []struct {
		name   string
		call   func(t *testing.T, s *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error)
		code   hcloud.ErrorCode
		status int
	}{
		{"invalid input", func(t *testing.T, _ *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			_, resp, err := c.Server.Create(t.Context(), basicCreateOpts("bad_name", nil))
			return resp, err
		}, hcloud.ErrorCodeInvalidInput, http.StatusUnprocessableEntity},
		{"name taken", func(t *testing.T, _ *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			mustCreate(t, c, basicCreateOpts("twice", nil))
			_, resp, err := c.Server.Create(t.Context(), basicCreateOpts("twice", nil))
			return resp, err
		}, hcloud.ErrorCodeUniquenessError, http.StatusConflict},
		{"delete while deleting", func(t *testing.T, _ *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			res := mustCreate(t, c, basicCreateOpts("gone", nil))
			if _, _, err := c.Server.DeleteWithResult(t.Context(), res.Server); err != nil {
				t.Fatal(err)
			}
			_, resp, err := c.Server.DeleteWithResult(t.Context(), res.Server)
			return resp, err
		}, hcloud.ErrorCodeLocked, http.StatusLocked},
		{"project limit", func(t *testing.T, s *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			for range 2 {
				if _, err := s.AddServer(hcloudtest.ServerInfo{}); err != nil {
					t.Fatal(err)
				}
			}
			_, resp, err := c.Server.Create(t.Context(), basicCreateOpts("third", nil))
			return resp, err
		}, hcloud.ErrorCodeResourceLimitExceeded, http.StatusForbidden},
		{"no capacity", func(t *testing.T, s *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			s.SetUnavailable("cx23", "fsn1", true)
			_, resp, err := c.Server.Create(t.Context(), basicCreateOpts("full", nil))
			return resp, err
		}, hcloud.ErrorCodeResourceUnavailable, http.StatusPreconditionFailed},
	}
	injected := map[hcloud.ErrorCode]int{
		hcloud.ErrorCodeMaintenance:  http.StatusForbidden,
		hcloud.ErrorCodeProtected:    http.StatusLocked,
		hcloud.ErrorCodeServiceError: http.StatusUnprocessableEntity,
		hcloud.ErrorUnsupportedError: http.StatusUnprocessableEntity,
	}
	for code, status := range injected {
		tests = append(tests, struct {
			name   string
			call   func(t *testing.T, s *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error)
			code   hcloud.ErrorCode
			status int
		}{"injected " + string(code), func(t *testing.T, s *hcloudtest.Server, c *hcloud.Client) (*hcloud.Response, error) {
			s.FailRequest("GET /servers", 1, hcloudtest.RequestFault{Code: string(code)})
			_, resp, err := c.Server.List(t.Context(), hcloud.ServerListOpts{})
			return resp, err
		}, code, status})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client, _ := newFake(t, hcloudtest.WithServerLimit(2))
			resp, err := tt.call(t, s, client)
			if !hcloud.IsError(err, tt.code) {
				t.Fatalf("error = %v; want code %s", err, tt.code)
			}
			if resp == nil || resp.StatusCode != tt.status {
				t.Errorf("HTTP status = %v; want %d", resp, tt.status)
			}
		})
	}
}
