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

// codeStatus is the HTTP status the API pairs with each error code. Where
// the public documentation is silent the value is the one observed in the
// wild (412 for resource_unavailable) or the closest HTTP meaning.
var codeStatus = map[string]int{
	"invalid_input":           http.StatusBadRequest,
	"json_error":              http.StatusBadRequest,
	"unsupported_error":       http.StatusBadRequest,
	"unauthorized":            http.StatusUnauthorized,
	"forbidden":               http.StatusForbidden,
	"resource_limit_exceeded": http.StatusForbidden,
	"protected":               http.StatusForbidden,
	"not_found":               http.StatusNotFound,
	"method_not_allowed":      http.StatusMethodNotAllowed,
	"conflict":                http.StatusConflict,
	"uniqueness_error":        http.StatusConflict,
	"deprecated_api_endpoint": http.StatusGone,
	"resource_unavailable":    http.StatusPreconditionFailed,
	"placement_error":         http.StatusPreconditionFailed,
	ErrorCodePlacementGroupMemberLimitReached: http.StatusPreconditionFailed,
	"invalid_server_type":                     http.StatusPreconditionFailed,
	"no_subnet_available":                     http.StatusPreconditionFailed,
	"ip_not_available":                        http.StatusPreconditionFailed,
	"server_already_attached":                 http.StatusPreconditionFailed,
	"server_not_stopped":                      http.StatusPreconditionFailed,
	"locked":                                  http.StatusLocked,
	"rate_limit_exceeded":                     http.StatusTooManyRequests,
	"server_error":                            http.StatusInternalServerError,
	"unknown_error":                           http.StatusInternalServerError,
	"bad_gateway":                             http.StatusBadGateway,
	"service_error":                           http.StatusServiceUnavailable,
	"maintenance":                             http.StatusServiceUnavailable,
	ErrorCodeUnavailable:                      http.StatusServiceUnavailable,
	"timeout":                                 http.StatusGatewayTimeout,
}

// StatusForCode returns the HTTP status the fake sends with an API error
// code; unknown codes get 400 Bad Request.
func StatusForCode(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusBadRequest
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
