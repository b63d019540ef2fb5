package hcloudtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// apiPrefix is the version prefix of the real endpoint
// (https://api.hetzner.cloud/v1). Path templates leave it out.
const apiPrefix = "/v1"

// Server is an in-memory Hetzner Cloud API listening on 127.0.0.1.
//
// All methods are safe for concurrent use. One mutex, mu, guards the whole
// project state (resources, actions, ID counters), the faults, the rate
// limiter and the request log: every request holds it while it reads or
// changes state, which makes each API call atomic, as a test expects
// (for example, only one of many concurrent creates of a name succeeds).
// Latency faults sleep before the lock is taken.
type Server struct {
	cfg       config
	listener  net.Listener
	http      *http.Server
	url       string
	transport *http.Transport
	routes    []route
	serveDone chan struct{}
	closing   chan struct{} // closed by Close to cut latency sleeps short

	lifeMu    sync.Mutex // guards closed and active
	lifeCond  *sync.Cond
	closed    bool
	active    int
	closeOnce sync.Once

	mu sync.Mutex
	st state
}

// NewServer starts a fake API on a free port of 127.0.0.1 with a
// catalogue of locations, server types and system images. Call
// [Server.Close] when done.
//
// A listener that cannot be opened makes NewServer return a server whose
// every request fails; in a test, that shows up at the first call.
func NewServer(opts ...Option) *Server {
	s := &Server{
		cfg:       newConfig(opts),
		serveDone: make(chan struct{}),
		closing:   make(chan struct{}),
	}
	s.lifeCond = sync.NewCond(&s.lifeMu)
	s.st = newState(&s.cfg, s.cfg.clock.Now())
	s.routes = s.buildRoutes()

	base, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		s.transport = base.Clone()
	} else {
		s.transport = &http.Transport{}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		// Keep the server usable as a value; requests to an unroutable
		// address fail immediately with a connection error.
		s.url = "http://127.0.0.1:1" + apiPrefix
		close(s.serveDone)
		return s
	}
	s.listener = l
	s.url = "http://" + l.Addr().String() + apiPrefix
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.serveDone)
		_ = s.http.Serve(l) // returns when Close closes the listener
	}()
	return s
}

// URL returns the API endpoint, ending in /v1 like
// https://api.hetzner.cloud/v1; pass it to [hcloud.WithEndpoint].
func (s *Server) URL() string { return s.url }

// Token returns the bearer token the server accepts.
func (s *Server) Token() string { return s.cfg.token }

// Client returns an hcloud-go client for this server: token and endpoint
// set, polling and retries with constant 1 ms backoffs and the default 5
// retries, and an HTTP transport of its own that Close shuts down. opts are
// applied last, so they override these settings.
func (s *Server) Client(opts ...hcloud.ClientOption) *hcloud.Client {
	backoff := hcloud.ConstantBackoff(time.Millisecond)
	all := []hcloud.ClientOption{
		hcloud.WithEndpoint(s.url),
		hcloud.WithToken(s.cfg.token),
		hcloud.WithHTTPClient(&http.Client{Transport: s.transport}),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: backoff}),
		// Both fields: WithRetryOpts assigns MaxRetries even when it is 0.
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: backoff, MaxRetries: 5}),
	}
	return hcloud.NewClient(append(all, opts...)...)
}

// Close stops accepting requests, waits for the outstanding ones to finish
// (a latency fault is cut short) and closes all connections, including the
// idle ones of clients made by [Server.Client]. It is safe to call more than
// once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.lifeMu.Lock()
		s.closed = true
		s.lifeMu.Unlock()
		close(s.closing)
		if s.http != nil {
			s.http.SetKeepAlivesEnabled(false) // also closes idle connections
			_ = s.listener.Close()
		}
		s.lifeMu.Lock()
		for s.active > 0 {
			s.lifeCond.Wait()
		}
		s.lifeMu.Unlock()
		if s.http != nil {
			// The handlers have returned, but net/http writes their
			// answers to the connections after that: Close alone could
			// cut an answer off (the client sees EOF). Shutdown waits for
			// the connections to go idle; its deadline bounds the wait
			// for a connection that never sent a request, which it counts
			// as busy for seconds.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.http.Shutdown(ctx)
			cancel()
			_ = s.http.Close()
		}
		<-s.serveDone
		s.transport.CloseIdleConnections()
	})
}

func (s *Server) enter() bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return false
	}
	s.active++
	return true
}

func (s *Server) leave() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.active--
	if s.active == 0 {
		s.lifeCond.Broadcast()
	}
}

// request is what a handler sees: the parsed call, the path parameters and
// the state time, read once per request so that one answer is consistent.
type request struct {
	query  url.Values
	body   []byte
	params map[string]string
	now    time.Time
}

// response is a handler's answer before it is written.
type response struct {
	status int
	body   any
}

type handlerFunc func(s *Server, r *request) (response, *apiError)

type route struct {
	method   string
	parts    []string
	template string
	handle   handlerFunc
}

func (s *Server) match(method, path string) (*route, map[string]string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	pathKnown := false
	for i := range s.routes {
		rt := &s.routes[i]
		params, ok := matchParts(rt.parts, parts)
		if !ok {
			continue
		}
		pathKnown = true
		if rt.method == method {
			return rt, params, true
		}
	}
	return nil, nil, pathKnown
}

func matchParts(pattern, parts []string) (map[string]string, bool) {
	if len(pattern) != len(parts) {
		return nil, false
	}
	var params map[string]string
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if parts[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[p[1:len(p)-1]] = parts[i]
			continue
		}
		if p != parts[i] {
			return nil, false
		}
	}
	return params, true
}

// ServeHTTP answers one API request. The order mirrors what a client of the
// real API experiences: latency, the rate limit, authentication, routing,
// then injected faults, then the operation itself.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if !s.enter() {
		writeError(w, newError(ErrorCodeUnavailable, "server is shutting down"))
		return
	}
	defer s.leave()

	path := strings.TrimPrefix(hr.URL.Path, apiPrefix)
	rt, params, pathKnown := s.match(hr.Method, path)
	template := hr.Method + " " + path
	if rt != nil {
		template = rt.template
	}
	body, bodyErr := readBody(hr)
	arrived := s.cfg.clock.Now()

	s.sleepLatency(hr)
	s.waitHold(hr, template)

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.clock.Now()
	w.Header().Set("X-Correlation-Id", fmt.Sprintf("%016x", s.st.nextRequestSeq()))
	out := s.serve(hr, w.Header(), rt, pathKnown, template, &request{
		query:  hr.URL.Query(),
		body:   body,
		params: params,
		now:    now,
	}, bodyErr)
	s.st.log = append(s.st.log, Request{
		Method:   hr.Method,
		Path:     path,
		Template: template,
		Query:    hr.URL.Query(),
		Status:   out.status(),
		Token:    bearerToken(hr),
		Arrived:  arrived,
		Time:     now,
	})
	s.st.counts[template]++
	setPaginationLink(w.Header(), s.url+path, hr.URL.Query(), out)
	out.write(w)
}

// outcome is the answer to one request: a response, an API error, or an
// injected fault.
type outcome struct {
	resp  response
	err   *apiError
	fault *RequestFault
}

func (o outcome) status() int {
	switch {
	case o.fault != nil && o.fault.Drop:
		return 0
	case o.fault != nil:
		return o.fault.status()
	case o.err != nil:
		return o.err.status
	}
	return o.resp.status
}

func (o outcome) write(w http.ResponseWriter) {
	switch {
	case o.fault != nil && o.fault.Drop:
		dropConnection(w)
	case o.fault != nil:
		writeFault(w, o.fault)
	case o.err != nil:
		writeError(w, o.err)
	default:
		writeJSON(w, o.resp.status, o.resp.body)
	}
}

// serve decides the answer; it runs with s.mu held.
func (s *Server) serve(hr *http.Request, h http.Header, rt *route, pathKnown bool, template string, req *request, bodyErr error) outcome {
	if fault := s.st.faults.takeOutageFault(); fault != nil {
		if fault.AfterEffect && rt != nil && bodyErr == nil {
			s.st.advance(req.now)
			_, _ = rt.handle(s, req)
		}
		return outcome{fault: fault}
	}
	if !s.st.limiter.take(req.now, h) {
		return outcome{err: newError("rate_limit_exceeded", "limit of %d requests per hour reached", s.st.limiter.limit)}
	}
	if token, ok := cutBearer(hr); !ok || !s.cfg.accepts(token) {
		return outcome{err: newError("unauthorized", "unable to authenticate")}
	}
	switch {
	case rt == nil && pathKnown:
		return outcome{err: newError("method_not_allowed", "method %s not allowed", hr.Method)}
	case rt == nil:
		return outcome{err: notFound("route")}
	case bodyErr != nil:
		return outcome{err: newError("json_error", "request body could not be read: %v", bodyErr)}
	}
	fault := s.st.faults.takeRequestFault(template)
	if fault == nil {
		fault = s.st.faults.takeEndpointFault(template)
	}
	if fault != nil && !fault.AfterEffect {
		return outcome{fault: fault}
	}
	s.st.advance(req.now)
	resp, err := rt.handle(s, req)
	if fault != nil {
		// The operation happened; the client never learns of it.
		return outcome{fault: fault}
	}
	return outcome{resp: resp, err: err}
}

// cutBearer returns the token of the request's Authorization header and
// whether it has a bearer token at all.
func cutBearer(hr *http.Request) (string, bool) {
	return strings.CutPrefix(hr.Header.Get("Authorization"), "Bearer ")
}

// bearerToken is the token of the request, empty when it has none.
func bearerToken(hr *http.Request) string {
	token, _ := cutBearer(hr)
	return token
}

// maxBody bounds request bodies; the largest legitimate one, a create with
// 32 KiB of user data, is far below it.
const maxBody = 1 << 20

func readBody(hr *http.Request) ([]byte, error) {
	if hr.Body == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(hr.Body, maxBody+1))
	if err == nil && buf.Len() > maxBody {
		err = fmt.Errorf("larger than %d bytes", maxBody)
	}
	return buf.Bytes(), err
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	data, err := json.Marshal(body)
	if err != nil {
		writeError(w, newError("server_error", "encoding response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

type errorBody struct {
	Error errorPayload `json:"error"`
}

type errorPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	details := e.details
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, e.status, errorBody{Error: errorPayload{Code: e.code, Message: e.message, Details: details}})
}

// decodeBody decodes a JSON request body into v, answering json_error for
// malformed input as the API does.
func decodeBody(r *request, v any) *apiError {
	if len(bytes.TrimSpace(r.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return newError("json_error", "invalid JSON in request body: %v", err)
	}
	return nil
}

func pathID(r *request, name string) (int64, *apiError) {
	id, err := strconv.ParseInt(r.params[name], 10, 64)
	if err != nil || id <= 0 {
		return 0, invalidField(name, "must be a positive integer")
	}
	return id, nil
}
