package hcloudscale

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/hcloudscale/hcloudscale/pool"
)

// ErrFenced is returned, wrapped, for a request that changes servers which
// the [Fence] refused. Nothing was sent.
var ErrFenced = pool.ErrFenced

// A Fence decides, for each request that changes servers, whether this
// process may send it now. With several replicas of which one leads, the
// leader's fence lets requests through only while it holds the lease.
//
// The Cluster asks the fence at the one place every request passes, just
// before the request goes to the network: below hcloud-go's retries, the
// rate-limit pacer's holds and the request timeout, so that no retry,
// paced request or resumed create flow is sent without asking. Reads
// (GET, HEAD) are not asked about.
type Fence interface {
	// AllowWrite is called before a request that changes servers is sent.
	// It returns an error (reported wrapped in ErrFenced) when the request
	// must not be sent, else the Permit that bounds it.
	AllowWrite() (Permit, error)
}

// A Permit is a [Fence]'s leave for one request that changes servers.
// With all fields set, a write can only be on the wire while the fence
// allows it: nothing of the request is written after Deadline or after
// Check fails, however slow the dial, the TLS handshake or the upload.
type Permit struct {
	// Deadline, when set, is when the request must have been written
	// whole: the request is cancelled then, and no byte of it is written
	// to the connection after it.
	Deadline time.Time
	// Check, when set, is asked again once the request has its
	// connection and before each write of its bytes: an error stops the
	// request before anything more of it is written.
	Check func() error
	// Done, when set, is called once when the request has ended. answered
	// is true when its outcome is known: the API answered, or nothing of
	// it was written. It is false when the request may have reached the
	// API without its answer reaching us (a timeout, a broken connection):
	// the API may still carry it out, so a lease must not be given up
	// until the API has had the time to.
	Done func(answered bool)
}

// WithFence makes every request that changes servers ask f first; see
// [Fence]. Without it every request is sent.
func WithFence(f Fence) Option {
	return func(o *options) { o.fence = f }
}

// fenceTransport asks the fence about every request that is not a read,
// and sends it over writes, whose connections check the permit at each
// write of the request's bytes.
type fenceTransport struct {
	next   http.RoundTripper
	writes http.RoundTripper
	fence  Fence
}

func newFenceTransport(next http.RoundTripper, f Fence) http.RoundTripper {
	if f == nil {
		return next
	}
	return &fenceTransport{next: next, writes: newGuardedTransport(next), fence: f}
}

func (t *fenceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	permit, err := t.fence.AllowWrite()
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		// A plain error: hcloud-go retries only API errors and network
		// timeouts, so a refused request is not tried again.
		return nil, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, ErrFenced, err)
	}
	ctx, cancel := context.WithCancel(req.Context())
	if !permit.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(req.Context(), permit.Deadline)
	}
	w := &write{permit: permit, cancel: cancel}
	// Armed until the answer's headers arrive: WroteRequest comes when
	// the request is in the connection's buffer, before it is flushed.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: w.gotConn})
	resp, err := t.writes.RoundTrip(req.WithContext(ctx))
	w.disarm()
	if err != nil {
		cancel()
		// Nothing was written when no connection was had, or the guard
		// stopped the first byte: the outcome is known.
		w.done(!w.written())
		if !w.guarded() {
			return nil, fmt.Errorf("%s %s: %w: its connection (%T) cannot be fenced: use an *http.Transport without a SOCKS proxy", req.Method, req.URL.Path, ErrFenced, w.connType)
		}
		if errors.Is(err, errWriteFenced) {
			return nil, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, ErrFenced, err)
		}
		return nil, err
	}
	// The answer's headers mean the API has the whole request, and it
	// answered it unless a gateway answered in its place.
	w.done(!outcomeUnknown(resp.StatusCode))
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// outcomeUnknown reports whether an answer with this status leaves open
// whether the API carries the request out: a gateway's 502, 503 or 504
// (the API's own "bad_gateway" and "timeout" errors come as 502 and 504).
// hcloud-go v2.52.0 retries 502 and 504 for that reason
// (client_handler_retry.go, retryPolicy).
func outcomeUnknown(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// write is one request under a Permit. Its methods are called from the
// request's goroutine and the transport's, hence mu.
type write struct {
	permit Permit
	cancel context.CancelFunc

	mu       sync.Mutex
	conn     *guardedConn // the connection it got; nil: none (yet)
	connType net.Conn     // a connection it got that is not guarded
	had      bool         // it got a connection
	wrote    bool         // a byte of it may have been written
	ended    bool
}

func (w *write) gotConn(info httptrace.GotConnInfo) {
	c := guardOf(info.Conn)
	w.mu.Lock()
	w.had, w.conn = true, c
	if c == nil {
		w.connType = info.Conn
	}
	w.mu.Unlock()
	if c != nil {
		c.arm(w)
		return
	}
	// A connection that is not ours (a SOCKS proxy's, say) cannot be
	// checked at each write: the request does not go.
	w.cancel()
}

func (w *write) disarm() {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c != nil {
		c.disarm(w)
	}
}

// guarded reports whether the request got no connection or a guarded one.
func (w *write) guarded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.connType == nil
}

// written reports whether a byte of the request may have been written.
func (w *write) written() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.had && (w.wrote || w.conn == nil)
}

func (w *write) done(answered bool) {
	w.mu.Lock()
	ended := w.ended
	w.ended = true
	w.mu.Unlock()
	if !ended && w.permit.Done != nil {
		w.permit.Done(answered)
	}
}

// allowed is asked before each write of the request's bytes.
func (w *write) allowed(now time.Time) error {
	if d := w.permit.Deadline; !d.IsZero() && !now.Before(d) {
		return fmt.Errorf("%w: the permit's deadline passed %s ago", errWriteFenced, now.Sub(d).Round(time.Millisecond))
	}
	if w.permit.Check != nil {
		if err := w.permit.Check(); err != nil {
			return fmt.Errorf("%w: %w", errWriteFenced, err)
		}
	}
	w.mu.Lock()
	w.wrote = true
	w.mu.Unlock()
	return nil
}

// errWriteFenced stops a request at its connection: nothing more of it is
// written.
var errWriteFenced = errors.New("the fence no longer allows this write")

// newGuardedTransport returns the transport for writes: next, an
// *http.Transport (New refuses another under a fence), cloned with HTTP/2
// off whatever next says, so that a write has its connection to itself,
// and a dialer whose connections ask the request's permit before each
// write of its bytes and stop writing at its deadline. Another
// RoundTripper is used as it is, and its requests refused (gotConn).
func newGuardedTransport(next http.RoundTripper) http.RoundTripper {
	base, ok := next.(*http.Transport)
	if !ok {
		return next
	}
	t := base.Clone()
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &guardedConn{Conn: c}, nil
	}
	return t
}

// guardedConn is a connection of the write transport: while a request is
// armed on it, each Write asks the request's permit first.
type guardedConn struct {
	net.Conn
	mu sync.Mutex
	w  *write
}

// guardOf returns the guardedConn under c, or nil. Under TLS, and under
// TLS in TLS (an HTTPS proxy's tunnel), too.
func guardOf(c net.Conn) *guardedConn {
	for {
		tc, ok := c.(*tls.Conn)
		if !ok {
			break
		}
		c = tc.NetConn()
	}
	g, _ := c.(*guardedConn)
	return g
}

func (c *guardedConn) arm(w *write) {
	c.mu.Lock()
	c.w = w
	c.mu.Unlock()
	if d := w.permit.Deadline; !d.IsZero() {
		_ = c.Conn.SetWriteDeadline(d)
	}
}

func (c *guardedConn) disarm(w *write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == w {
		c.w = nil
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
}

func (c *guardedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	w := c.w
	c.mu.Unlock()
	if w != nil {
		if err := w.allowed(time.Now()); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}
