package hcloudtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Error codes the fake answers with that hcloud-go v2.52.0 has no constant
// for.
const (
	ErrorCodePlacementGroupMemberLimitReached = "placement_group_member_limit_reached"
	ErrorCodeUnavailable                      = "unavailable"
)

// codeStatus is the HTTP status the API pairs with each error code.
//
// The general codes follow the "Errors" table of the API reference
// (docs.hetzner.cloud, reference/cloud): 400 json_error; 401
// unauthorized; 403 forbidden, maintenance and resource_limit_exceeded;
// 404 not_found; 405 method_not_allowed; 409 uniqueness_error and
// conflict; 410 deprecated_api_endpoint; 412 resource_unavailable; 422
// invalid_input, service_error and unsupported_error; 423 locked and
// protected; 429 rate_limit_exceeded; 500 server_error; 503 unavailable;
// 504 timeout. hcloud-go's own fixtures agree where they have one (422
// service_error, 409 conflict).
//
// The call-specific codes follow the reference's "Operation specific
// errors" tables: POST /servers answers 422 placement_error,
// primary_ip_assigned and primary_ip_datacenter_mismatch but 412
// primary_ip_version_mismatch; attach_to_network, change_type and the
// Primary IP operations answer 422 for all of theirs (server_not_stopped,
// server_already_attached, ip_not_available, no_subnet_available,
// invalid_server_type, server_has_ipv4, must_be_unassigned, ...). The
// reference names no code for a full placement group; the fake's
// placement_group_member_limit_reached gets 422 like the other placement
// errors. unknown_error and bad_gateway, which hcloud-go knows but the
// reference does not, get 500 and 502.
var codeStatus = map[string]int{
	"json_error":              http.StatusBadRequest,
	"unauthorized":            http.StatusUnauthorized,
	"forbidden":               http.StatusForbidden,
	"maintenance":             http.StatusForbidden,
	"resource_limit_exceeded": http.StatusForbidden,
	"not_found":               http.StatusNotFound,
	"method_not_allowed":      http.StatusMethodNotAllowed,
	"uniqueness_error":        http.StatusConflict,
	"conflict":                http.StatusConflict,
	"deprecated_api_endpoint": http.StatusGone,
	"resource_unavailable":    http.StatusPreconditionFailed,
	"invalid_input":           http.StatusUnprocessableEntity,
	"service_error":           http.StatusUnprocessableEntity,
	"unsupported_error":       http.StatusUnprocessableEntity,
	"locked":                  http.StatusLocked,
	"protected":               http.StatusLocked,
	"rate_limit_exceeded":     http.StatusTooManyRequests,
	"server_error":            http.StatusInternalServerError,
	ErrorCodeUnavailable:      http.StatusServiceUnavailable,
	"timeout":                 http.StatusGatewayTimeout,

	"placement_error":                         http.StatusUnprocessableEntity,
	ErrorCodePlacementGroupMemberLimitReached: http.StatusUnprocessableEntity,
	"invalid_server_type":                     http.StatusUnprocessableEntity,
	"server_not_stopped":                      http.StatusUnprocessableEntity,
	"server_already_attached":                 http.StatusUnprocessableEntity,
	"no_subnet_available":                     http.StatusUnprocessableEntity,
	"ip_not_available":                        http.StatusUnprocessableEntity,
	"primary_ip_assigned":                     http.StatusUnprocessableEntity,
	"primary_ip_already_assigned":             http.StatusUnprocessableEntity,
	"primary_ip_version_mismatch":             http.StatusPreconditionFailed,
	"must_be_unassigned":                      http.StatusUnprocessableEntity,
	"networks_overlap":                        http.StatusUnprocessableEntity,
	"primary_ip_datacenter_mismatch":          http.StatusUnprocessableEntity,
	"server_has_ipv4":                         http.StatusUnprocessableEntity,
	"server_has_ipv6":                         http.StatusUnprocessableEntity,
	"unknown_error":                           http.StatusInternalServerError,
	"bad_gateway":                             http.StatusBadGateway,
}

// StatusForCode returns the HTTP status the fake sends with an API error
// code; unknown codes get 422 Unprocessable Entity, the status of the
// API's call-specific codes.
func StatusForCode(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusUnprocessableEntity
}

// apiError is an error answer: the HTTP status and the body's
// {"error":{"code","message","details"}}.
type apiError struct {
	status  int
	code    string
	message string
	details any
}

func newError(code, format string, args ...any) *apiError {
	return &apiError{status: StatusForCode(code), code: code, message: fmt.Sprintf(format, args...)}
}

func notFound(resource string) *apiError {
	return newError("not_found", "%s not found", resource)
}

// fieldErrors collects invalid input per field so that a request with many
// mistakes is reported in one answer, as the API does.
type fieldErrors struct {
	order  []string
	fields map[string][]string
}

func (f *fieldErrors) add(field, format string, args ...any) {
	if f.fields == nil {
		f.fields = map[string][]string{}
	}
	if _, ok := f.fields[field]; !ok {
		f.order = append(f.order, field)
	}
	f.fields[field] = append(f.fields[field], fmt.Sprintf(format, args...))
}

type errorField struct {
	Name     string   `json:"name"`
	Messages []string `json:"messages"`
}

// err returns nil when nothing was added, else an invalid_input error whose
// message reads like the API's: "invalid input in field 'name'" or
// "invalid input in fields 'name', 'labels'".
func (f *fieldErrors) err() *apiError {
	if len(f.order) == 0 {
		return nil
	}
	quoted := make([]string, len(f.order))
	details := make([]errorField, len(f.order))
	for i, name := range f.order {
		quoted[i] = "'" + name + "'"
		details[i] = errorField{Name: name, Messages: slices.Clone(f.fields[name])}
	}
	word := "field"
	if len(f.order) > 1 {
		word = "fields"
	}
	e := newError("invalid_input", "invalid input in %s %s", word, strings.Join(quoted, ", "))
	e.details = map[string]any{"fields": details}
	return e
}

func invalidField(field, format string, args ...any) *apiError {
	var f fieldErrors
	f.add(field, format, args...)
	return f.err()
}
