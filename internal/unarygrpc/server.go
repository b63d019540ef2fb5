// Package unarygrpc is a gRPC server for services whose methods are all
// unary, speaking HTTP/2 directly over each connection.
//
// The autoscaler's externalgrpc client makes thousands of small calls per
// loop, one at a time. grpc-go's server hands every call between a
// reader, a handler and a writer goroutine and through its control
// buffer; that, not the call's work, is most of the server's CPU time per
// call. This server reads a connection's frames on one goroutine, runs the
// handlers marked inline (those answering from memory) on it, and writes
// each answer (headers, message and trailers) with one write, flushed when
// no whole frame is waiting to be read. Other handlers run on their own
// goroutines, as do answers that do not fit the client's flow-control
// windows, so the reader never waits for the client to open a window (it
// does wait, like any writer, for a client that stops reading its socket).
// On Linux (amd64, arm64), in builds without the race detector or a
// sanitizer, a TCP connection's reads and writes are system calls the
// scheduler does not see (sysConn): they never block, and seen, the first
// of each call after an idle moment would wake the runtime's monitor
// thread, on every call.
//
// It implements what a gRPC client needs of a server for unary calls:
// the connection preface and settings, flow control in both directions,
// PING, RST_STREAM (cancelling the call's context), a graceful stop in two
// GOAWAY steps as grpc-go's (calls sent before the client read the first
// are served), grpc-timeout deadlines, metadata, peer and TLS information
// in the handler's context, trailers-only error answers with status
// details, and the gRPC message framing without compression. Streaming
// methods answer Unimplemented. What a handler or client may notice
// against grpc-go's server:
//   - The incoming metadata holds the request's own headers only:
//     user-agent, :authority and content-type are not in it, and without
//     other headers there is none. The context carries no server transport
//     stream: grpc.Method, SetHeader, SendHeader and SetTrailer do not work
//     (the interceptor's info has the method).
//   - A PING is acknowledged within 10 ms rather than at once. grpc-go's
//     client pings after every answer while no PING of its is pending, to
//     estimate the bandwidth; held back, one PING covers the calls of those
//     10 ms instead of waking the server a second time per call.
//   - Up to twice MAX_CONCURRENT_STREAMS handlers may run on a connection
//     whose client reset its streams; beyond that new streams are refused.
package unarygrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec
	"google.golang.org/grpc/status"
)

// ErrServerStopped is what Serve returns once the server has stopped.
var ErrServerStopped = errors.New("unarygrpc: the server has been stopped")

// handshakeTimeout bounds the TLS handshake and the client's connection
// preface.
const handshakeTimeout = 20 * time.Second

// Server serves the unary methods of the services registered on it. Its
// methods are safe for concurrent use.
type Server struct {
	opts    options
	methods map[string]*method // by full method name, "/service/Method"
	streams map[string]bool    // streaming methods by full name: Unimplemented

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	stopped   bool // Stop or GracefulStop was called
	connsDone *sync.Cond
}

type method struct {
	impl    any
	handler grpc.MethodHandler
	inline  bool
}

type options struct {
	tls         *tls.Config
	interceptor grpc.UnaryServerInterceptor
	codec       encoding.CodecV2
	bytesCodec  BytesCodec // codec, when it is one
	inline      func(fullMethod string) bool
	maxRecv     int
}

// Option configures [NewServer].
type Option func(*options)

// WithTLS serves TLS with cfg (the "h2" protocol is added to its
// NextProtos and to those of the configurations its GetConfigForClient
// returns); without it the server speaks plaintext HTTP/2.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			o.tls = nil
			return
		}
		c := withH2(cfg)
		if get := cfg.GetConfigForClient; get != nil {
			c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				cc, err := get(hello)
				if cc == nil || err != nil {
					return cc, err
				}
				return withH2(cc), nil
			}
		}
		o.tls = c
	}
}

// withH2 returns cfg, or a copy of it that offers "h2" first.
func withH2(cfg *tls.Config) *tls.Config {
	if slices.Contains(cfg.NextProtos, "h2") {
		return cfg
	}
	c := cfg.Clone()
	c.NextProtos = append([]string{"h2"}, c.NextProtos...)
	return c
}

// WithInterceptors runs the interceptors, first to last, around every
// handler.
func WithInterceptors(is ...grpc.UnaryServerInterceptor) Option {
	return func(o *options) { o.interceptor = chain(is) }
}

// WithCodec decodes requests and encodes answers with c (default: the
// registered "proto" codec). When c is also a [BytesCodec], its methods
// are used instead of those of encoding.CodecV2.
func WithCodec(c encoding.CodecV2) Option {
	return func(o *options) { o.codec = c }
}

// BytesCodec is a codec that reads and writes plain byte slices, without
// the mem.BufferSlice of encoding.CodecV2 around each message.
type BytesCodec interface {
	// UnmarshalBytes decodes data into v; it keeps nothing of data.
	UnmarshalBytes(data []byte, v any) error
	// MarshalAppend appends the encoding of v to dst.
	MarshalAppend(dst []byte, v any) ([]byte, error)
}

// WithInline runs the methods for which inline returns true on the
// connection's reader goroutine. Only methods that answer from memory,
// without waiting on anything, may be inline: while one runs, the
// connection reads nothing. An inline call's request is decoded from the
// connection's read buffer when it came in one frame, so its handler must
// decode it before it returns (generated handlers do).
func WithInline(inline func(fullMethod string) bool) Option {
	return func(o *options) { o.inline = inline }
}

// WithMaxRecvMsgSize bounds a request message (default 4 MiB, as
// grpc-go's).
func WithMaxRecvMsgSize(n int) Option {
	return func(o *options) { o.maxRecv = n }
}

// NewServer returns a server with no services.
func NewServer(opts ...Option) *Server {
	o := options{codec: encoding.GetCodecV2("proto"), maxRecv: 4 << 20}
	for _, opt := range opts {
		opt(&o)
	}
	o.bytesCodec, _ = o.codec.(BytesCodec)
	s := &Server{
		opts:      o,
		methods:   map[string]*method{},
		streams:   map[string]bool{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}
	s.connsDone = sync.NewCond(&s.mu)
	return s
}

// RegisterService registers a service and its implementation, as
// grpc.Server's does; call it before Serve. It panics if impl does not
// implement sd.HandlerType or a method is registered twice.
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	if impl != nil && sd.HandlerType != nil {
		ht := reflect.TypeOf(sd.HandlerType).Elem()
		if !reflect.TypeOf(impl).Implements(ht) {
			panic(fmt.Sprintf("unarygrpc: RegisterService found the handler of type %v that does not satisfy %v", reflect.TypeOf(impl), ht))
		}
	}
	for _, md := range sd.Methods {
		name := "/" + sd.ServiceName + "/" + md.MethodName
		if _, dup := s.methods[name]; dup {
			panic("unarygrpc: method registered twice: " + name)
		}
		m := &method{impl: impl, handler: md.Handler}
		if s.opts.inline != nil {
			m.inline = s.opts.inline(name)
		}
		s.methods[name] = m
	}
	for _, st := range sd.Streams {
		s.streams["/"+sd.ServiceName+"/"+st.StreamName] = true
	}
}

var _ grpc.ServiceRegistrar = (*Server)(nil)

// Serve accepts connections on lis and serves each on its own goroutines
// until lis fails or the server stops; it then returns ErrServerStopped
// if the server was stopped, else the listener's error. It closes lis.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = lis.Close()
		return ErrServerStopped
	}
	s.listeners[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
		_ = lis.Close()
	}()
	var pause time.Duration
	for {
		raw, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return ErrServerStopped
			}
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		c := newConn(s, raw)
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			_ = raw.Close()
			return ErrServerStopped
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// forget removes a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 {
		s.connsDone.Broadcast()
	}
	s.mu.Unlock()
}

// stop closes the listeners and returns the connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for l := range s.listeners {
		_ = l.Close()
	}
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Stop closes the listeners and every connection at once; the contexts
// of calls in progress are cancelled. It returns when every connection is
// closed (handlers running on their own goroutines may still be running).
func (s *Server) Stop() {
	for _, c := range s.stop() {
		c.close()
	}
	s.waitConns()
}

// GracefulStop closes the listeners, tells every client with GOAWAY to
// send no new calls, and returns when the calls in progress have been
// answered and every connection is closed.
func (s *Server) GracefulStop() {
	for _, c := range s.stop() {
		go c.goAway() // one whose client does not read must not hold up the others
	}
	s.waitConns()
}

func (s *Server) waitConns() {
	s.mu.Lock()
	for len(s.conns) > 0 {
		s.connsDone.Wait()
	}
	s.mu.Unlock()
}

// chain makes one interceptor of is, the first outermost.
func chain(is []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	switch len(is) {
	case 0:
		return nil
	case 1:
		return is[0]
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return is[0](ctx, req, info, chainFrom(is, 1, info, handler))
	}
}

func chainFrom(is []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(is) {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return is[i](ctx, req, info, chainFrom(is, i+1, info, final))
	}
}

// errUnknownMethod is the status of a call of a method not registered.
func errUnknownMethod(name string) error {
	return status.Errorf(codes.Unimplemented, "unknown method %s", name)
}
