package hcloudtest

import (
	"maps"
	"net/url"
	"slices"
	"time"
)

// Request is one entry of the request log.
type Request struct {
	Method string
	// Path is the request path without the /v1 prefix, e.g. "/servers/42".
	Path string
	// Template names the operation: method and path template, e.g.
	// "GET /servers/{id}". Unknown paths keep their literal path.
	Template string
	Query    url.Values
	// Status is the HTTP status sent, or 0 when the connection was dropped.
	Status int
	// Token is the bearer token the request carried, whether or not the
	// server accepts it; empty without one. With [WithTokens] it tells
	// which client sent the request.
	Token string
	// Arrived is the server's clock when the request arrived, before any
	// latency fault ([Server.SetLatency]) delayed it: the time the client
	// sent it, give or take the loopback.
	Arrived time.Time
	// Time is the server's clock when the request was handled.
	Time time.Time
}

// Requests returns a copy of the request log in arrival order. Every
// request is logged, including those refused by the rate limiter or failed
// by a fault.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.st.log))
	for i, r := range s.st.log {
		r.Query = maps.Clone(r.Query)
		out[i] = r
	}
	return out
}

// Count returns how many requests matched template since the start or the
// last [Server.ResetCounts]. Templates are the method plus the path with
// "{id}" for IDs: "POST /servers", "GET /servers", "GET /servers/{id}",
// "DELETE /servers/{id}", "POST /servers/{id}/actions/poweron",
// "GET /actions", "GET /actions/{id}".
func (s *Server) Count(template string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.counts[template]
}

// Counts returns the request counts by template.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.counts)
}

// Templates returns every path template the server answers, sorted.
func (s *Server) Templates() []string {
	out := make([]string, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, r.template)
	}
	slices.Sort(out)
	return out
}

// ResetCounts clears the counts and the request log.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.st.counts)
	s.st.log = nil
}

// ActiveRequests reports how many requests the server is handling (those
// held by [Server.SetLatency] included), so that a test can act while a
// request is in flight instead of guessing when it arrived.
func (s *Server) ActiveRequests() int {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	return s.active
}
