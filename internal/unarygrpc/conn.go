package unarygrpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	// recvWindow is the flow-control window the server gives each stream
	// and the connection.
	recvWindow = 1 << 20
	// maxStreams is the number of calls a client may have open on one
	// connection (SETTINGS_MAX_CONCURRENT_STREAMS).
	maxStreams = 100
	// maxHeaderList bounds the decoded size of a request's headers.
	maxHeaderList = 1 << 20
	// maxFrame is the largest frame the server reads (the HTTP/2 default,
	// not raised in its settings).
	maxFrame = 1 << 14
	// initialWindow is HTTP/2's initial window size, until the client's
	// settings say otherwise.
	initialWindow = 65535
	// ioBuffer is the size of a connection's read and write buffers.
	ioBuffer = 32 << 10
	// pingAckDelay is how long the server may hold a PING's
	// acknowledgement. grpc-go's client sends a PING (and a window
	// update) whenever an answer arrives and no PING of its is
	// unacknowledged, to estimate the bandwidth; acknowledged at once,
	// every call would wake the server twice. Held back, one PING covers
	// the calls of pingAckDelay.
	pingAckDelay = 10 * time.Millisecond
	// maxPendingPings is the number of PINGs whose acknowledgement may be
	// held; more are all acknowledged at once.
	maxPendingPings = 8
	// drainTimeout bounds each step of closing a connection gracefully:
	// the wait for the client's acknowledgement of the GOAWAY, and the
	// wait for the client to close its side after the last answer.
	drainTimeout = time.Second
)

// drainPing is the payload of the PING of a graceful stop's first GOAWAY.
var drainPing = [8]byte{'h', 'c', 's', 'd', 'r', 'a', 'i', 'n'}

// conn is one client connection. Its reader goroutine (serve) reads every
// frame, runs inline calls and writes control frames; other calls run on
// their own goroutines and write their answers themselves.
type conn struct {
	s   *Server
	raw net.Conn
	nc  net.Conn // raw, or the TLS connection over it
	br  *bufio.Reader
	fr  *http2.Framer

	// ctx carries the peer; it is cancelled when the connection closes,
	// and with it every call's context.
	ctx    context.Context
	cancel context.CancelFunc

	wmu       sync.Mutex // guards the writing side: bw, fr's writes, henc, hbuf, needFlush, pings, pingTimer
	bw        *bufio.Writer
	henc      *hpack.Encoder
	hbuf      bytes.Buffer
	needFlush bool      // something was written and not flushed
	pings     [][8]byte // PINGs not yet acknowledged
	pingTimer *time.Timer
	pingsIn   int // PINGs received, for tests

	peerMax atomic.Uint32 // the client's SETTINGS_MAX_FRAME_SIZE

	// Reader only: the header block being read.
	hdr          *headerDecoder
	req          reqHeaders // what the block says, field by field
	hdrStream    uint32     // the block's stream
	hdrEndStream bool       // its HEADERS frame ends the stream
	hdrOpen      bool       // a block was begun and has not ended

	// Reader only: for inline calls.
	inlineBody []byte          // the request of the call running
	decInline  func(any) error // c.decodeInline, bound once
	out        []byte          // the buffer of their answers

	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond // on mu: windows grew, a stream was reset or the connection closed
	streams map[uint32]*stream
	sendWin int64  // connection-level send window
	peerWin int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	last    uint32 // highest stream the client opened
	// busy counts the streams open or whose handler still runs (after the
	// client reset the stream): at twice maxStreams new streams are
	// refused, so that resetting streams does not let a client start
	// handlers without bound.
	busy      int
	ready     bool // past the handshake: frames may be written
	goingAway bool // the first GOAWAY of a graceful stop was sent
	draining  bool // the final GOAWAY was sent: no new streams; close when none is left
	closed    bool

	// Reader only. Received data is given back to the client's windows
	// as it arrives (a request's body is bounded by the message size
	// limit instead), so the client can never overrun them.
	recvUnacked uint32 // received on the connection, not yet given back
}

// stream is one call.
type stream struct {
	id      uint32
	name    string
	m       *method // nil: unknown or streaming method
	md      metadata.MD
	timeout time.Duration // 0: none
	badHdr  error         // a status for a malformed request

	// Reader only, until the call runs.
	body        []byte
	recvUnacked uint32
	answered    bool // answered before the request ended (too large)

	// Guarded by conn.mu.
	sendWin  int64
	reset    bool    // reset by the client, or the connection closed
	cancel   stopper // ends the call's context
	running  bool    // its handler or answer is running: it holds a slot of busy
	released bool    // it gave its slot of busy back
}

func newConn(s *Server, raw net.Conn) *conn {
	raw = fastIO(raw)
	c := &conn{
		s: s, raw: raw, nc: raw,
		streams: map[uint32]*stream{},
		sendWin: initialWindow, peerWin: initialWindow,
	}
	c.peerMax.Store(maxFrame)
	c.cond = sync.NewCond(&c.mu)
	c.decInline = c.decodeInline
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// serve runs the connection until it fails or closes.
func (c *conn) serve() {
	defer c.s.forget(c)
	defer c.close()
	if err := c.handshake(); err != nil {
		return
	}
	if err := c.readLoop(); err != nil {
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			c.writeGoAway(http2.ErrCode(ce))
		}
	}
}

// handshake does the TLS handshake, reads the client's preface and sends
// the server's settings.
func (c *conn) handshake() error {
	_ = c.raw.SetDeadline(time.Now().Add(handshakeTimeout))
	p := &peer.Peer{Addr: c.raw.RemoteAddr(), LocalAddr: c.raw.LocalAddr()}
	if cfg := c.s.opts.tls; cfg != nil {
		tc := tls.Server(c.raw, cfg)
		if err := tc.HandshakeContext(c.ctx); err != nil {
			return err
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol != "h2" {
			return errors.New("the client did not negotiate h2")
		}
		c.nc = tc
		p.AuthInfo = credentials.TLSInfo{State: st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	c.ctx = peer.NewContext(c.ctx, p)
	c.br = bufio.NewReaderSize(c.nc, ioBuffer)
	c.bw = bufio.NewWriterSize(c.nc, ioBuffer)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.br, preface); err != nil || string(preface) != http2.ClientPreface {
		return errors.New("no HTTP/2 client preface")
	}
	_ = c.raw.SetDeadline(time.Time{})

	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(maxFrame)
	c.hdr = newHeaderDecoder(maxHeaderList, c.req.field)
	c.henc = hpack.NewEncoder(&c.hbuf)

	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
	)
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, recvWindow-initialWindow)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err == nil {
		// Only now may a graceful stop write its GOAWAY: a client reads
		// the settings first.
		c.mu.Lock()
		c.ready = true
		c.mu.Unlock()
	}
	return err
}

// readLoop reads frames until the connection fails; the error is an
// http2.ConnectionError when the client broke the protocol.
func (c *conn) readLoop() error {
	for {
		if !c.frameBuffered() {
			if err := c.flushPending(); err != nil {
				return err
			}
		}
		var typ http2.FrameType
		if h, err := c.br.Peek(9); err == nil {
			typ = http2.FrameType(h[3])
		}
		f, err := c.fr.ReadFrame()
		if _, ok := errors.AsType[http2.StreamError](err); ok && typ == http2.FrameHeaders {
			// A HEADERS frame the framer could not parse (its padding
			// longer than its payload): its block was never decoded, so
			// the connection's HPACK state is lost; a connection error,
			// as RFC 9113 has it for the padding.
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if err == nil {
			err = c.handle(f)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			return err
		}
	}
}

// frameBuffered reports whether a whole frame is in the read buffer, so
// that reading it will not block.
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, err := c.br.Peek(9)
	if err != nil {
		return false
	}
	return n >= 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		c.hdr.start()
		c.req = reqHeaders{}
		c.hdrStream, c.hdrEndStream, c.hdrOpen = f.StreamID, f.StreamEnded(), true
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		// The framer lets through only the CONTINUATION frames of a
		// HEADERS frame it parsed (one it could not parse ends the
		// connection in readLoop); the check keeps a stray one from the
		// last block's state all the same.
		if !c.hdrOpen || f.StreamID != c.hdrStream {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			if f.Data == drainPing {
				c.drain()
			}
			return nil
		}
		return c.onPing(f.Data)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		if st := c.streams[f.StreamID]; st != nil {
			c.endLocked(st)
		}
		c.mu.Unlock()
	case *http2.GoAwayFrame, *http2.PriorityFrame:
		// The client sends no new streams after GOAWAY; it closes the
		// connection when its calls are done.
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil
}

// onPing acknowledges a PING within pingAckDelay (see there).
func (c *conn) onPing(data [8]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pingsIn++
	c.pings = append(c.pings, data)
	if len(c.pings) >= maxPendingPings {
		c.needFlush = true
		return c.writePingAcksLocked()
	}
	if c.pingTimer == nil {
		c.pingTimer = time.AfterFunc(pingAckDelay, c.ackPings)
	} else if len(c.pings) == 1 {
		c.pingTimer.Reset(pingAckDelay)
	}
	return nil
}

// ackPings sends the acknowledgements held back.
func (c *conn) ackPings() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.pings) == 0 {
		return
	}
	if c.writePingAcksLocked() == nil {
		c.needFlush = false
		if c.bw.Flush() == nil {
			return
		}
	}
	c.close() // a write failed: the connection is gone (an armed timer finds nothing to do)
}

func (c *conn) writePingAcksLocked() error {
	for _, d := range c.pings {
		if err := c.fr.WritePing(true, d); err != nil {
			return err
		}
	}
	c.pings = c.pings[:0]
	return nil
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			c.mu.Lock()
			delta := int64(s.Val) - c.peerWin
			c.peerWin = int64(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		case http2.SettingMaxFrameSize:
			c.peerMax.Store(s.Val)
		case http2.SettingHeaderTableSize:
			c.wmu.Lock()
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
			c.wmu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.writeFrames(false, c.fr.WriteSettingsAck)
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendWin+inc > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWin += inc
	} else if st := c.streams[f.StreamID]; st != nil {
		st.sendWin += inc
	}
	c.cond.Broadcast()
	return nil
}

// onHeaderFragment decodes a fragment of the header block; the block's
// last opens a stream or ends one.
func (c *conn) onHeaderFragment(frag []byte, ended bool) error {
	if err := c.hdr.fragment(frag); err != nil || !ended {
		return err
	}
	c.hdrOpen = false
	truncated, err := c.hdr.end(c.hdrStream)
	if err != nil {
		return err
	}
	return c.onHeaders(c.hdrStream, c.hdrEndStream, truncated)
}

// onHeaders opens a stream with the header block just read; a second
// header block on an open stream is the request's trailers.
func (c *conn) onHeaders(id uint32, endStream, truncated bool) error {
	c.mu.Lock()
	st := c.streams[id]
	if st != nil {
		c.mu.Unlock()
		if !endStream {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.requestEnded(st)
		return nil
	}
	if id%2 == 0 || id <= c.last {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.last = id
	if truncated {
		// Over maxHeaderList, which the client was told: as grpc-go does.
		c.mu.Unlock()
		return c.writeFrames(false, func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeFrameSize) })
	}
	if c.draining || c.closed || len(c.streams) >= maxStreams || c.busy >= 2*maxStreams {
		c.mu.Unlock()
		return c.writeFrames(false, func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
	}
	st = &stream{id: id, sendWin: c.peerWin}
	c.streams[id] = st
	c.busy++
	c.mu.Unlock()

	c.req.finish(c.s, st)
	if endStream {
		c.requestEnded(st)
	}
	return nil
}

// reqHeaders collects what a request's header block says, field by field.
type reqHeaders struct {
	path, method, contentType string
	timeout                   time.Duration
	md                        metadata.MD
	bad                       error // a status for a malformed request
}

func (r *reqHeaders) field(name, value string) {
	switch name {
	case ":path":
		r.path = value
	case ":method":
		r.method = value
	case "content-type":
		r.contentType = value
	case "grpc-timeout":
		d, err := parseTimeout(value)
		if err != nil {
			r.bad = status.Errorf(codes.Internal, "malformed grpc-timeout %q: %v", value, err)
		}
		r.timeout = d
	case "grpc-encoding":
		if value != "identity" {
			r.bad = status.Errorf(codes.Unimplemented, "grpc-encoding %q: compressed requests are not supported", value)
		}
	case "te", "grpc-accept-encoding", "connection", "user-agent":
		// Not metadata here (grpc-go's server passes user-agent on):
		// every call would build a map for it.
	default:
		if name[0] == ':' { // the header decoder hands on no empty name
			return
		}
		v := value
		if strings.HasSuffix(name, "-bin") {
			b, err := decodeBinHeader(v)
			if err != nil {
				r.bad = status.Errorf(codes.Internal, "malformed binary metadata %q: %v", name, err)
				return
			}
			v = string(b)
		}
		if r.md == nil {
			r.md = metadata.MD{}
		}
		r.md[name] = append(r.md[name], v)
	}
}

// finish gives st the request's method, deadline and metadata, or the
// status its headers call for.
func (r *reqHeaders) finish(s *Server, st *stream) {
	st.name, st.timeout, st.md, st.badHdr = r.path, r.timeout, r.md, r.bad
	r.md = nil // st's now, read by its handler: no later block may add to it
	switch {
	case st.badHdr != nil:
	case r.method != "POST":
		st.badHdr = status.Errorf(codes.Internal, "method %q: gRPC calls are POST", r.method)
	case r.contentType != "application/grpc" && !strings.HasPrefix(r.contentType, "application/grpc+") && !strings.HasPrefix(r.contentType, "application/grpc;"):
		st.badHdr = status.Errorf(codes.Internal, "content-type %q is not gRPC's", r.contentType)
	}
	st.m = s.methods[st.name]
	if st.m == nil && st.badHdr == nil {
		if s.streams[st.name] {
			st.badHdr = status.Errorf(codes.Unimplemented, "%s is a streaming method; only unary calls are served", st.name)
		} else {
			st.badHdr = errUnknownMethod(st.name)
		}
	}
}

func (c *conn) onData(f *http2.DataFrame) error {
	n := f.Length
	// The connection's window, whatever becomes of the stream.
	c.recvUnacked += n
	if c.recvUnacked >= recvWindow/4 {
		inc := c.recvUnacked
		c.recvUnacked = 0
		if err := c.writeFrames(false, func() error { return c.fr.WriteWindowUpdate(0, inc) }); err != nil {
			return err
		}
	}
	c.mu.Lock()
	st := c.streams[f.StreamID]
	c.mu.Unlock()
	if st == nil || st.answered {
		return nil // a call already ended; its late data is dropped
	}
	if len(st.body)+len(f.Data()) > 5+c.s.opts.maxRecv { // the message's 5-byte prefix, then the message
		st.answered = true
		c.answerError(st, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d)", c.s.opts.maxRecv), true)
		return nil
	}
	if f.StreamEnded() {
		if st.body == nil && st.m != nil && st.m.inline {
			// The whole request in one frame, for a call that runs before
			// the next frame is read: decode it where it was read. (A
			// codec keeps nothing of the data it decodes, as grpc-go's
			// codecs do not: grpc-go reuses the buffers too.)
			st.body = f.Data()
		} else {
			st.body = append(st.body, f.Data()...)
		}
		c.requestEnded(st)
		return nil
	}
	st.body = append(st.body, f.Data()...)
	st.recvUnacked += n
	if st.recvUnacked >= recvWindow/4 {
		inc := st.recvUnacked
		st.recvUnacked = 0
		return c.writeFrames(false, func() error { return c.fr.WriteWindowUpdate(st.id, inc) })
	}
	return nil
}

// requestEnded runs the call, on the reader goroutine if it is inline.
func (c *conn) requestEnded(st *stream) {
	if st.answered {
		return
	}
	st.answered = true
	if st.badHdr != nil {
		c.answerError(st, st.badHdr, true)
		return
	}
	ctx, cancel := c.callContext(st)
	c.mu.Lock()
	if st.reset {
		c.mu.Unlock()
		cancel.stop()
		return
	}
	st.cancel = cancel
	st.running = true
	c.mu.Unlock()
	if st.m.inline {
		c.run(ctx, st, true)
		return
	}
	go c.run(ctx, st, false)
}

// stopper ends a call's context.
type stopper interface{ stop() }

// cancelStopper is a stopper of a context from the context package.
type cancelStopper context.CancelFunc

func (f cancelStopper) stop() { f() }

func (c *conn) callContext(st *stream) (context.Context, stopper) {
	ctx := c.ctx
	if st.md != nil {
		ctx = metadata.NewIncomingContext(ctx, st.md)
	}
	if st.m.inline {
		ic := &inlineContext{Context: ctx}
		if st.timeout > 0 {
			ic.deadline = time.Now().Add(st.timeout)
		}
		return ic, ic
	}
	var cancel context.CancelFunc
	if st.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, st.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	return ctx, cancelStopper(cancel)
}

// run calls the handler and answers.
func (c *conn) run(ctx context.Context, st *stream, inline bool) {
	var dec func(any) error
	if inline {
		c.inlineBody = st.body
		dec = c.decInline
	} else {
		dec = func(v any) error { return c.decode(st.body, v) }
	}
	resp, err := st.m.handler(st.m.impl, ctx, dec, c.s.opts.interceptor)
	st.body = nil
	if inline {
		c.inlineBody = nil
	}
	if err != nil {
		c.answerError(st, err, inline)
		return
	}
	var buf []byte
	if inline {
		buf = c.out[:0]
	}
	msg, err := c.marshal(buf, resp)
	if err != nil {
		c.answerError(st, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err), inline)
		return
	}
	if inline && cap(msg) <= maxKeptOut {
		c.out = msg // answer is done with it when it returns
	}
	c.answer(st, msg, inline)
}

// maxKeptOut bounds the answer buffer a connection keeps for its inline
// calls.
const maxKeptOut = 1 << 20

// marshal appends resp, with its 5-byte gRPC message prefix, to dst.
func (c *conn) marshal(dst []byte, resp any) ([]byte, error) {
	dst = append(dst, 0, 0, 0, 0, 0)
	if bc := c.s.opts.bytesCodec; bc != nil {
		out, err := bc.MarshalAppend(dst, resp)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
		return out, nil
	}
	data, err := c.s.opts.codec.Marshal(resp)
	if err != nil {
		return nil, err
	}
	defer data.Free()
	dst = slices.Grow(dst, data.Len())[:5+data.Len()]
	binary.BigEndian.PutUint32(dst[1:5], uint32(data.Len()))
	data.CopyTo(dst[5:])
	return dst, nil
}

// decodeInline decodes the request of the inline call running.
func (c *conn) decodeInline(v any) error { return c.decode(c.inlineBody, v) }

// decode reads the one message of a unary request.
func (c *conn) decode(body []byte, v any) error {
	if len(body) < 5 {
		return status.Errorf(codes.Internal, "grpc: the request holds no message")
	}
	if body[0] != 0 {
		return status.Errorf(codes.Unimplemented, "grpc: compressed messages are not supported")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if int(n) != len(body)-5 {
		return status.Errorf(codes.Internal, "grpc: a unary request holds one message of %d bytes, got %d bytes", n, len(body)-5)
	}
	var err error
	if bc := c.s.opts.bytesCodec; bc != nil {
		err = bc.UnmarshalBytes(body[5:], v)
	} else {
		err = c.s.opts.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(body[5:])}, v)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return nil
}

// answer writes headers, msg and trailers. When msg fits the windows it
// is written at once (and, inline, flushed when the reader next waits);
// otherwise a goroutine waits for the client to open them, so that the
// reader never does.
func (c *conn) answer(st *stream, msg []byte, inline bool) {
	c.mu.Lock()
	if st.reset || c.closed {
		c.mu.Unlock()
		c.finish(st, nil)
		return
	}
	n := int64(len(msg))
	if n > c.sendWin || n > st.sendWin {
		c.mu.Unlock()
		if inline {
			go c.answerSlowly(st, bytes.Clone(msg)) // msg is the reader's buffer
		} else {
			c.answerSlowly(st, msg)
		}
		return
	}
	c.sendWin -= n
	st.sendWin -= n
	c.mu.Unlock()
	frame := int(c.peerMax.Load())
	err := c.writeFrames(!inline, func() error {
		if err := c.writeHeaders(st.id, false, hdrStatus200, hdrContentType); err != nil {
			return err
		}
		for rest := msg; len(rest) > 0; {
			chunk := rest[:min(len(rest), frame)]
			rest = rest[len(chunk):]
			if err := c.fr.WriteData(st.id, false, chunk); err != nil {
				return err
			}
		}
		return c.writeHeaders(st.id, true, hdrOK)
	})
	c.finish(st, err)
}

// answerSlowly writes an answer frame by frame as the windows allow.
func (c *conn) answerSlowly(st *stream, msg []byte) {
	err := c.writeFrames(true, func() error { return c.writeHeaders(st.id, false, hdrStatus200, hdrContentType) })
	for err == nil && len(msg) > 0 {
		c.mu.Lock()
		for (c.sendWin <= 0 || st.sendWin <= 0) && !st.reset && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			err = net.ErrClosed
			break
		}
		if st.reset {
			c.mu.Unlock()
			c.finish(st, nil) // the client gave up on the call; the connection is fine
			return
		}
		n := min(int64(len(msg)), c.sendWin, st.sendWin, int64(c.peerMax.Load()))
		c.sendWin -= n
		st.sendWin -= n
		c.mu.Unlock()
		chunk := msg[:n]
		msg = msg[n:]
		err = c.writeFrames(true, func() error { return c.fr.WriteData(st.id, false, chunk) })
	}
	if err == nil {
		err = c.writeFrames(true, func() error { return c.writeHeaders(st.id, true, hdrOK) })
	}
	c.finish(st, err)
}

// answerError answers with err's status in a trailers-only response.
func (c *conn) answerError(st *stream, err error, inline bool) {
	s, ok := status.FromError(err)
	if !ok {
		s = status.FromContextError(err) // as grpc-go: a bare ctx.Err() keeps its code
	}
	fields := []hpack.HeaderField{hdrStatus200, hdrContentType, {Name: "grpc-status", Value: codeString(s.Code())}}
	if msg := s.Message(); msg != "" {
		fields = append(fields, hpack.HeaderField{Name: "grpc-message", Value: encodeGrpcMessage(msg)})
	}
	if len(s.Details()) > 0 { // Proto clones the status: not for every error
		if b, err := proto.Marshal(s.Proto()); err == nil {
			fields = append(fields, hpack.HeaderField{Name: "grpc-status-details-bin", Value: encodeBinHeader(b)})
		}
	}
	c.mu.Lock()
	gone := st.reset || c.closed
	c.mu.Unlock()
	var werr error
	if !gone {
		werr = c.writeFrames(!inline, func() error { return c.writeHeaders(st.id, true, fields...) })
	}
	c.finish(st, werr)
}

// finish ends a call that was answered (or could not be: err).
func (c *conn) finish(st *stream, err error) {
	c.mu.Lock()
	st.running = false
	c.endLocked(st)
	c.mu.Unlock()
	if err != nil {
		c.close()
	}
}

// endLocked forgets a stream and cancels its call; a draining connection
// closes with its last stream.
func (c *conn) endLocked(st *stream) {
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	st.reset = true
	if st.cancel != nil {
		st.cancel.stop()
	}
	if !st.running && !st.released {
		st.released = true
		c.busy--
	}
	c.cond.Broadcast()
	c.closeIfDrainedLocked()
}

// closeIfDrainedLocked closes a draining connection without streams.
func (c *conn) closeIfDrainedLocked() {
	if !c.draining || len(c.streams) > 0 || c.closed {
		return
	}
	// The last answer may wait in the write buffer for the reader to
	// flush it; flush it first (taking wmu here, under mu, could deadlock
	// with a writer).
	go func() {
		_ = c.flushPending()
		// Closing at once could reset the connection with frames of the
		// client's still unread, and lose the last answer with them.
		// Close the writing side instead: the client closes its own, the
		// reader sees the end and closes; a client that does not is cut
		// off after drainTimeout.
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			time.AfterFunc(drainTimeout, c.close)
			return
		}
		c.close()
	}()
}

// resetStream answers a stream's error with RST_STREAM.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		st.answered = true
		c.endLocked(st)
	}
	c.mu.Unlock()
	_ = c.writeFrames(false, func() error { return c.fr.WriteRSTStream(id, code) })
}

var (
	hdrStatus200   = hpack.HeaderField{Name: ":status", Value: "200"}
	hdrContentType = hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	hdrOK          = hpack.HeaderField{Name: "grpc-status", Value: "0"}
)

// writeHeaders encodes fields into a HEADERS frame and, beyond the
// client's frame size, CONTINUATION frames. Call it holding wmu.
func (c *conn) writeHeaders(id uint32, end bool, fields ...hpack.HeaderField) error {
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.henc.WriteField(f); err != nil {
			return err
		}
	}
	block := c.hbuf.Bytes()
	frame := int(c.peerMax.Load())
	first := block[:min(len(block), frame)]
	rest := block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	for err == nil && len(rest) > 0 {
		frag := rest[:min(len(rest), frame)]
		rest = rest[len(frag):]
		err = c.fr.WriteContinuation(id, len(rest) == 0, frag)
	}
	return err
}

// writeFrames writes with fn and flushes now or, unless flush (the
// reader's control frames and inline answers), when the reader next waits
// for the client.
func (c *conn) writeFrames(flush bool, fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := fn(); err != nil {
		return err
	}
	if !flush {
		c.needFlush = true
		return nil
	}
	c.needFlush = false
	return c.bw.Flush()
}

func (c *conn) flushPending() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.needFlush {
		return nil
	}
	c.needFlush = false
	return c.bw.Flush()
}

func (c *conn) writeGoAway(code http2.ErrCode) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.fr.WriteGoAway(last, code, nil) == nil {
		_ = c.bw.Flush()
	}
}

// goAway tells the client to open no new streams and closes the
// connection once its calls are answered, in two steps as grpc-go's
// server does: a GOAWAY with the highest stream ID and a PING first, so
// that the calls the client sent before it read the GOAWAY are still
// served; once the PING is acknowledged (or after drainTimeout), a GOAWAY
// with the last stream the client opened, after which new streams are
// refused.
func (c *conn) goAway() {
	c.mu.Lock()
	if c.closed || !c.ready {
		// Not past the handshake: nothing was served on it yet.
		c.closeLocked()
		c.mu.Unlock()
		return
	}
	if c.goingAway {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	c.mu.Unlock()
	c.wmu.Lock()
	err := c.fr.WriteGoAway(1<<31-1, http2.ErrCodeNo, nil)
	if err == nil {
		err = c.fr.WritePing(false, drainPing)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.close()
		return
	}
	time.AfterFunc(drainTimeout, c.drain)
}

// drain is the second step of goAway.
func (c *conn) drain() {
	c.mu.Lock()
	if c.draining || c.closed || !c.goingAway {
		c.mu.Unlock()
		return
	}
	c.draining = true
	c.mu.Unlock()
	c.writeGoAway(http2.ErrCodeNo)
	c.mu.Lock()
	c.closeIfDrainedLocked()
	c.mu.Unlock()
}

func (c *conn) close() {
	c.mu.Lock()
	c.closeLocked()
	c.mu.Unlock()
}

func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	_ = c.raw.Close()
	c.cond.Broadcast()
}
