package hcloudtest

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// RequestFault describes how one request fails. See [Server.FailRequest].
type RequestFault struct {
	// Code is the API error code of the answer, such as "server_error" or
	// "timeout". Empty with a Status sends a non-JSON body, which hcloud-go
	// reports as hcloud.ErrStatusCode.
	Code string
	// Message is the error message; a generic one is used when empty.
	Message string
	// Status is the HTTP status; zero takes the code's usual status
	// ([StatusForCode]).
	Status int
	// Details is sent as error.details when not nil.
	Details any
	// AfterEffect performs the operation before failing, as when the
	// response to a successful request is lost: the server exists, the
	// client sees an error.
	AfterEffect bool
	// Drop closes the connection without any response instead of
	// answering.
	Drop bool
}

func (f *RequestFault) status() int {
	if f.Status != 0 {
		return f.Status
	}
	if f.Code == "" {
		return http.StatusInternalServerError
	}
	return StatusForCode(f.Code)
}

type pendingRequestFault struct {
	template string
	skip     int // matching requests to let through first
	fault    RequestFault
}

type actionFault struct {
	command string
	code    string
	message string
}

type unavailability struct {
	serverType string
	location   string
}

// faults holds the injected failures; guarded by Server.mu.
type faults struct {
	requests    []*pendingRequestFault
	actions     []actionFault
	unavailable map[unavailability]bool
	latency     time.Duration
	// outage, when not empty, fails every request with these faults in
	// turn; outageSeq counts the requests it failed.
	outage    []RequestFault
	outageSeq int
	// endpoints holds the outages of single endpoints by template, and
	// endpointSeq the requests each failed.
	endpoints   map[string][]RequestFault
	endpointSeq map[string]int
	holds       []*pendingHold
}

type pendingHold struct {
	template string
	skip     int
	hold     *Hold
}

// takeEndpointFault returns the fault of the next request matching
// template during an outage of that endpoint, nil when there is none.
func (f *faults) takeEndpointFault(template string) *RequestFault {
	list := f.endpoints[template]
	if len(list) == 0 {
		return nil
	}
	fault := list[f.endpointSeq[template]%len(list)]
	f.endpointSeq[template]++
	return &fault
}

// takeHold counts one request matching template against the pending
// holds and returns the hold whose turn it is.
func (f *faults) takeHold(template string) *Hold {
	for i, p := range f.holds {
		if p.template != template {
			continue
		}
		if p.skip > 0 {
			p.skip--
			continue
		}
		f.holds = slices.Delete(f.holds, i, i+1)
		return p.hold
	}
	return nil
}

// takeOutageFault returns the fault of the next request during an outage,
// nil when there is none.
func (f *faults) takeOutageFault() *RequestFault {
	if len(f.outage) == 0 {
		return nil
	}
	fault := f.outage[f.outageSeq%len(f.outage)]
	f.outageSeq++
	return &fault
}

// takeRequestFault counts one request matching template against every
// pending fault and returns the first fault whose turn it is.
func (f *faults) takeRequestFault(template string) *RequestFault {
	var hit *RequestFault
	kept := f.requests[:0]
	for _, p := range f.requests {
		if p.template != template {
			kept = append(kept, p)
			continue
		}
		if p.skip > 0 || hit != nil {
			if hit == nil {
				p.skip--
			}
			kept = append(kept, p)
			continue
		}
		fault := p.fault
		hit = &fault
	}
	clear(f.requests[len(kept):])
	f.requests = kept
	return hit
}

func (f *faults) takeActionFault(command string) *actionFault {
	for i, a := range f.actions {
		if a.command == command {
			f.actions = append(f.actions[:i], f.actions[i+1:]...)
			return &a
		}
	}
	return nil
}

func (f *faults) isUnavailable(serverType, location string) bool {
	for _, k := range []unavailability{
		{serverType, location}, {serverType, ""}, {"", location}, {"", ""},
	} {
		if f.unavailable[k] {
			return true
		}
	}
	return false
}

// FailRequest makes the nth next request matching template fail as f
// describes; nth 1 is the very next one. template is the method and path
// template as in [Server.Count], for example "POST /servers" or
// "GET /actions". Each call fails one request; call it again for more.
func (s *Server) FailRequest(template string, nth int, f RequestFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.faults.requests = append(s.st.faults.requests, &pendingRequestFault{
		template: template,
		skip:     max(nth, 1) - 1,
		fault:    f,
	})
}

// SetOutage makes every later request, whatever its endpoint, fail as
// the given faults describe, in turn (the first request gets the first
// fault, the next the second, and so on, round and round), before rate
// limiting and authentication, as when the API is down. SetOutage() with
// no faults ends the outage. A fault with AfterEffect or Drop behaves as
// for [Server.FailRequest].
func (s *Server) SetOutage(faults ...RequestFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.faults.outage = append([]RequestFault(nil), faults...)
	s.st.faults.outageSeq = 0
}

// SetEndpointOutage makes every later request matching template (as in
// [Server.FailRequest]) fail as the given faults describe, in turn, while
// other endpoints answer: GET /actions failing while creates and deletes
// get through. SetEndpointOutage(template) with no faults ends it. The
// faults apply after rate limiting and authentication, as FailRequest's.
func (s *Server) SetEndpointOutage(template string, faults ...RequestFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.st.faults
	if f.endpoints == nil {
		f.endpoints, f.endpointSeq = map[string][]RequestFault{}, map[string]int{}
	}
	if len(faults) == 0 {
		delete(f.endpoints, template)
	} else {
		f.endpoints[template] = append([]RequestFault(nil), faults...)
	}
	f.endpointSeq[template] = 0
}

// Hold keeps one request waiting before it is handled, as a hung
// connection does; see [Server.HoldRequest].
type Hold struct {
	arrived  chan struct{}
	released chan struct{}
	once     sync.Once
}

// Arrived is closed once the held request has come in and waits.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held request go on to be handled (and answered).
// Calling it more than once is fine.
func (h *Hold) Release() { h.once.Do(func() { close(h.released) }) }

// HoldRequest makes the nth next request matching template (as in
// [Server.FailRequest]) wait before it is handled, until the Hold is
// released, the client gives up on it, or the Server closes; it is then
// handled as usual (a client that gave up does not see the answer).
// Other requests go on meanwhile.
func (s *Server) HoldRequest(template string, nth int) *Hold {
	h := &Hold{arrived: make(chan struct{}), released: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.faults.holds = append(s.st.faults.holds, &pendingHold{template: template, skip: max(nth, 1) - 1, hold: h})
	return h
}

// waitHold holds the request if a hold is due for it.
func (s *Server) waitHold(hr *http.Request, template string) {
	s.mu.Lock()
	h := s.st.faults.takeHold(template)
	s.mu.Unlock()
	if h == nil {
		return
	}
	close(h.arrived)
	select {
	case <-h.released:
	case <-hr.Context().Done():
	case <-s.closing:
	}
}

// DropConnection closes the connection of the nth next request matching
// template without answering. With afterEffect the operation happens
// first, so the client loses the response to a request that succeeded.
//
// The client sees an error for a POST, PUT or DELETE. Go's HTTP transport
// silently resends a GET whose reused keep-alive connection closes before
// any answer, so a dropped GET usually shows up as a second request rather
// than as an error.
func (s *Server) DropConnection(template string, nth int, afterEffect bool) {
	s.FailRequest(template, nth, RequestFault{Drop: true, AfterEffect: afterEffect})
}

// FailAction makes the next action of command (such as "create_server",
// "start_server" (a create's start or a power-on), "attach_to_network")
// end with status error and the given code and message when it
// completes; empty ones become "action_failed" and "action failed". The
// request that starts the action still succeeds, so the resource exists.
// Actions that were to follow it (the start_server after a failed
// create_server) fail with the same error. Each call fails one action.
func (s *Server) FailAction(command, code, message string) {
	code = cmp.Or(code, "action_failed")
	message = cmp.Or(message, "action failed")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.faults.actions = append(s.st.faults.actions, actionFault{command: command, code: code, message: message})
}

// SetUnavailable makes server creates of serverType in location fail with
// resource_unavailable (unavailable true) or lifts that (false). An empty
// serverType or location matches any. The catalogue still lists the type
// as available, as happens with the real API during shortages.
func (s *Server) SetUnavailable(serverType, location string, unavailable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := unavailability{serverType: serverType, location: location}
	if unavailable {
		s.st.faults.unavailable[k] = true
	} else {
		delete(s.st.faults.unavailable, k)
	}
}

// SetLatency delays every later request by d of real time before it is
// handled (and before the lock is taken, so requests overlap). Zero turns
// it off.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.faults.latency = max(d, 0)
}

func (s *Server) sleepLatency(hr *http.Request) {
	s.mu.Lock()
	d := s.st.faults.latency
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-hr.Context().Done():
	case <-s.closing:
	}
}

func writeFault(w http.ResponseWriter, f *RequestFault) {
	if f.Code == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(f.status())
		_, _ = w.Write([]byte(http.StatusText(f.status()) + "\n"))
		return
	}
	msg := f.Message
	if msg == "" {
		msg = "injected " + f.Code
	}
	writeError(w, &apiError{status: f.status(), code: f.Code, message: msg, details: f.Details})
}

// dropConnection closes the client's connection without writing a
// response. The server speaks HTTP/1.1 on plain TCP, where hijacking always
// works; should it not, a bare 502 is the closest answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	_ = conn.Close()
}

// ForgetActions removes every action that concerns the server from the
// API, as Hetzner does with old actions: a client waiting for one sees it
// vanish (GET /actions no longer lists it, GET /actions/{id} answers
// not_found). A running action is dropped as if it had failed: its effect
// never happens, and a forgotten delete leaves the server as it was. It
// returns the number of actions removed.
func (s *Server) ForgetActions(serverID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.advance(s.cfg.clock.Now())
	n := 0
	for id, a := range s.st.actions {
		if !slices.ContainsFunc(a.resources, func(r schema.ActionResourceReference) bool {
			return r.Type == "server" && r.ID == serverID
		}) {
			continue
		}
		delete(s.st.actions, id)
		if a.status == actionRunning {
			s.st.running = slices.DeleteFunc(s.st.running, func(r *actionRec) bool { return r == a })
			if a.onError != nil {
				a.onError()
			}
			a.onSuccess, a.onError = nil, nil
		}
		n++
	}
	return n
}
