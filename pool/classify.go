package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Hetzner error codes that hcloud-go has no constant for.
const (
	// errorCodePlacementGroupMemberLimitReached: the spread placement
	// group already holds its 10 servers.
	errorCodePlacementGroupMemberLimitReached hcloud.ErrorCode = "placement_group_member_limit_reached"
	// errorCodeUnavailable: "a service or product is currently not
	// available".
	errorCodeUnavailable hcloud.ErrorCode = "unavailable"
)

// Codes of failures that carry no Hetzner error code. They become the
// reason label of the autoscaler's failed-scale-up metrics, so the set is
// small and fixed.
const (
	// CodeTimeout: the create flow ran out of its creation timeout.
	CodeTimeout = "timeout"
	// CodeActionFailed: an action failed without an error code.
	CodeActionFailed = "action-failed"
	// CodeRequestFailed: the API could not be reached (connection
	// refused or reset, an answer that was not JSON).
	CodeRequestFailed = "request-failed"
	// CodeServerTypeNotFound: the catalogue has no such server type.
	CodeServerTypeNotFound = "server-type-not-found"
	// CodeServerTypeUnavailable: the catalogue says the type cannot be
	// ordered in the pool's location.
	CodeServerTypeUnavailable = "server-type-unavailable"
	// CodeImage: no image could be resolved for the type's architecture.
	CodeImage = "image"
	// CodeNameTaken: the server name exists but belongs to no server of
	// this pool.
	CodeNameTaken = "name-taken"
	// CodeNotStarted: a server of the pool has not come up within the
	// creation timeout, and no create flow of this process owns it (it
	// was left behind by a restart).
	CodeNotStarted = "not-started"
	// CodeUnknownStatus: the API reports the server's status as unknown.
	//
	// Deprecated: a server in status unknown is Running without error
	// info, so that the autoscaler counts it as registered or unregistered
	// (see the package documentation, Deleting and shrinking).
	CodeUnknownStatus = "unknown-status"
	// CodeInternal: anything else.
	CodeInternal = "internal"
)

// ErrorClass says whether a failure means "no capacity for this offering"
// (the autoscaler should try another pool) or anything else. The values
// equal the Cluster Autoscaler's cloudprovider.InstanceErrorClass.
type ErrorClass int

// The error classes.
const (
	OutOfResources ErrorClass = 1
	Other          ErrorClass = 99
)

func (c ErrorClass) String() string {
	switch c {
	case OutOfResources:
		return "OutOfResources"
	case Other:
		return "Other"
	default:
		return fmt.Sprintf("ErrorClass(%d)", int(c))
	}
}

// ErrorInfo describes why an instance failed, as the autoscaler's
// cloudprovider.InstanceErrorInfo does. Message never contains user data
// or tokens: it is built from API error messages and our own texts.
type ErrorInfo struct {
	Class   ErrorClass
	Code    string
	Message string
}

// capacityCodes are the Hetzner codes that mean the offering (server type
// in a location, or the placement group) has no room: waiting does not
// help within minutes, another pool might.
var capacityCodes = map[hcloud.ErrorCode]bool{
	hcloud.ErrorCodeResourceUnavailable:       true,
	hcloud.ErrorCodeResourceLimitExceeded:     true,
	hcloud.ErrorCodePlacementError:            true,
	errorCodePlacementGroupMemberLimitReached: true,
	errorCodeUnavailable:                      true,
}

// isPlacementGroupFull recognises a full placement group by its message,
// since the API has reported it both with its own code and as a generic
// service_error ("placement group with ID … contains already 10 servers").
func isPlacementGroupFull(code hcloud.ErrorCode, message string) bool {
	if code == errorCodePlacementGroupMemberLimitReached {
		return true
	}
	m := strings.ToLower(message)
	return strings.Contains(m, "placement group") && strings.Contains(m, "contains already")
}

// classify turns the error of a create flow into ErrorInfo. what says
// which step failed ("create server", "attach to network", ...).
func classify(what string, err error) ErrorInfo {
	var apiErr hcloud.Error
	var actErr hcloud.ActionError
	var infoErr *infoError
	switch {
	case errors.As(err, &infoErr):
		return infoErr.info
	case errors.As(err, &apiErr):
		return codeInfo(apiErr.Code, fmt.Sprintf("%s: %s", what, apiErr.Message))
	case errors.As(err, &actErr):
		if actErr.Code == "" || actErr.Code == "<unknown>" {
			return ErrorInfo{Class: Other, Code: CodeActionFailed, Message: fmt.Sprintf("%s: %s", what, actErr.Message)}
		}
		return codeInfo(hcloud.ErrorCode(actErr.Code), fmt.Sprintf("%s: %s", what, actErr.Message))
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorInfo{Class: Other, Code: CodeTimeout, Message: fmt.Sprintf("%s: creation timeout exceeded", what)}
	case isRequestFailure(err):
		return ErrorInfo{Class: Other, Code: CodeRequestFailed, Message: fmt.Sprintf("%s: %v", what, err)}
	default:
		return ErrorInfo{Class: Other, Code: CodeInternal, Message: fmt.Sprintf("%s: %v", what, err)}
	}
}

func codeInfo(code hcloud.ErrorCode, message string) ErrorInfo {
	if capacityCodes[code] {
		return ErrorInfo{Class: OutOfResources, Code: string(code), Message: message}
	}
	if isPlacementGroupFull(code, message) {
		return ErrorInfo{Class: OutOfResources, Code: string(errorCodePlacementGroupMemberLimitReached), Message: message}
	}
	return ErrorInfo{Class: Other, Code: string(code), Message: message}
}

// infoError carries a failure whose classification is known where it
// happens, such as a server type the catalogue does not offer in the
// location.
type infoError struct {
	info ErrorInfo
}

func (e *infoError) Error() string { return e.info.Message }

// isRequestFailure reports errors of the transport rather than the API:
// a dropped or refused connection, or an answer that was not JSON.
func isRequestFailure(err error) bool {
	var netErr net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, hcloud.ErrStatusCode) || errors.As(err, &netErr)
}

// transientCodes are API codes worth sending the same request again for.
// hcloud-go already retries timeout, bad_gateway, conflict and
// rate_limit_exceeded a few times; a retry here runs after those.
var transientCodes = []hcloud.ErrorCode{
	hcloud.ErrorCodeTimeout,
	hcloud.ErrorCodeBadGateway,
	hcloud.ErrorCodeConflict,
	hcloud.ErrorCodeRateLimitExceeded,
	hcloud.ErrorCodeServerError,
}

// isTransient reports whether a failed request may succeed when sent again:
// a transport failure (the connection dropped, possibly after the API
// acted), a 5xx without a JSON body, or a transient API code. A capacity
// code is never transient here: the autoscaler needs to hear about it.
func isTransient(resp *hcloud.Response, err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrFenced) {
		return false
	}
	if hcloud.IsError(err, transientCodes...) {
		return true
	}
	var apiErr hcloud.Error
	if errors.As(err, &apiErr) {
		return false
	}
	if errors.Is(err, hcloud.ErrStatusCode) {
		return resp != nil && resp.Response != nil && resp.StatusCode >= http.StatusInternalServerError
	}
	return isRequestFailure(err)
}
