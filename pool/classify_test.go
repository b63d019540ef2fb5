package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

func apiError(code hcloud.ErrorCode, msg string) error {
	return fmt.Errorf("wrapped: %w", hcloud.Error{Code: code, Message: msg})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorInfo
	}{
		{name: "resource_unavailable", err: apiError(hcloud.ErrorCodeResourceUnavailable, "sold out"),
			want: ErrorInfo{OutOfResources, "resource_unavailable", "create server: sold out"}},
		{name: "resource_limit_exceeded", err: apiError(hcloud.ErrorCodeResourceLimitExceeded, "server limit exceeded"),
			want: ErrorInfo{OutOfResources, "resource_limit_exceeded", "create server: server limit exceeded"}},
		{name: "placement_error", err: apiError(hcloud.ErrorCodePlacementError, "no host"),
			want: ErrorInfo{OutOfResources, "placement_error", "create server: no host"}},
		{name: "placement group full", err: apiError(errorCodePlacementGroupMemberLimitReached, "full"),
			want: ErrorInfo{OutOfResources, "placement_group_member_limit_reached", "create server: full"}},
		{name: "placement group full as service_error", err: apiError(hcloud.ErrorCodeServiceError, "placement group with ID 7 contains already 10 servers"),
			want: ErrorInfo{OutOfResources, "placement_group_member_limit_reached", "create server: placement group with ID 7 contains already 10 servers"}},
		{name: "unavailable", err: apiError(errorCodeUnavailable, "not available"),
			want: ErrorInfo{OutOfResources, "unavailable", "create server: not available"}},
		{name: "invalid_input", err: apiError(hcloud.ErrorCodeInvalidInput, "invalid input in field 'name'"),
			want: ErrorInfo{Other, "invalid_input", "create server: invalid input in field 'name'"}},
		{name: "action failed with capacity code", err: errors.Join((&hcloud.Action{ID: 1, Status: hcloud.ActionStatusError, ErrorCode: "resource_unavailable", ErrorMessage: "gone"}).Error()),
			want: ErrorInfo{OutOfResources, "resource_unavailable", "create server: gone"}},
		{name: "action failed without code", err: (&hcloud.Action{ID: 1, Status: hcloud.ActionStatusError}).Error(),
			want: ErrorInfo{Other, CodeActionFailed, "create server: Unknown error"}},
		{name: "deadline", err: fmt.Errorf("waiting: %w", context.DeadlineExceeded),
			want: ErrorInfo{Other, CodeTimeout, "create server: creation timeout exceeded"}},
		{name: "connection dropped", err: &url.Error{Op: "Post", URL: "http://x/servers", Err: io.EOF},
			want: ErrorInfo{Other, CodeRequestFailed, `create server: Post "http://x/servers": EOF`}},
		{name: "decided before the request", err: &infoError{ErrorInfo{Other, CodeImage, "no image"}},
			want: ErrorInfo{Other, CodeImage, "no image"}},
		{name: "anything else", err: errors.New("boom"),
			want: ErrorInfo{Other, CodeInternal, "create server: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, classify("create server", tt.err)); diff != "" {
				t.Errorf("classify(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestIsTransient(t *testing.T) {
	status := func(code int) *hcloud.Response { return &hcloud.Response{Response: &http.Response{StatusCode: code}} }
	tests := []struct {
		name string
		resp *hcloud.Response
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "timeout code", err: apiError(hcloud.ErrorCodeTimeout, ""), want: true},
		{name: "server_error", err: apiError(hcloud.ErrorCodeServerError, ""), want: true},
		{name: "rate limit", err: apiError(hcloud.ErrorCodeRateLimitExceeded, ""), want: true},
		{name: "capacity is never transient", err: apiError(hcloud.ErrorCodeResourceUnavailable, ""), want: false},
		{name: "uniqueness", err: apiError(hcloud.ErrorCodeUniquenessError, ""), want: false},
		{name: "invalid input", err: apiError(hcloud.ErrorCodeInvalidInput, ""), want: false},
		{name: "503 without body", resp: status(503), err: fmt.Errorf("hcloud: %w 503", hcloud.ErrStatusCode), want: true},
		{name: "404 without body", resp: status(404), err: fmt.Errorf("hcloud: %w 404", hcloud.ErrStatusCode), want: false},
		{name: "EOF", err: &url.Error{Op: "Post", Err: io.EOF}, want: true},
		{name: "cancelled", err: fmt.Errorf("x: %w", context.Canceled), want: false},
		{name: "deadline", err: &url.Error{Op: "Post", Err: context.DeadlineExceeded}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isTransient(tt.resp, tt.err); got != tt.want {
				t.Errorf("isTransient(%v) = %t; want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorClassAndStateStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{OutOfResources.String(), "OutOfResources"},
		{Other.String(), "Other"},
		{ErrorClass(5).String(), "ErrorClass(5)"},
		{Running.String(), "running"},
		{Creating.String(), "creating"},
		{Deleting.String(), "deleting"},
		{State(0).String(), "State(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q; want %q", tt.got, tt.want)
		}
	}
}
