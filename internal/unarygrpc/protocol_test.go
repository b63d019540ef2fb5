package unarygrpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rawClient speaks HTTP/2 frames to a server, for what a gRPC client
// never sends.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer
}

func newRawClient(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, conn: conn, fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

// headerBlock is the HPACK block of a gRPC request for method.
func (c *rawClient) headerBlock(method string) []byte {
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "test"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// grpcMessage frames a BytesValue as a gRPC message.
func grpcMessage(v []byte) []byte {
	b, _ := proto.Marshal(wrapperspb.Bytes(v))
	out := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	copy(out[5:], b)
	return out
}

// until reads frames until want returns true for one, failing on EOF.
func (c *rawClient) until(what string, want func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if want(f) {
			return f
		}
	}
}

func (c *rawClient) goAway(t *testing.T) http2.ErrCode {
	t.Helper()
	f := c.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	code := f.(*http2.GoAwayFrame).ErrCode
	// The server closes the connection after it.
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("the connection stayed open after GOAWAY")
				}
			}
			return code
		}
	}
}

func TestProtocol(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)

	t.Run("ping is acknowledged", func(t *testing.T) {
		c := newRawClient(t, addr)
		data := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
		if err := c.fr.WritePing(false, data); err != nil {
			t.Fatal(err)
		}
		f := c.until("PING ack", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
		if f.(*http2.PingFrame).Data != data {
			t.Errorf("PING ack carries %v, want %v", f.(*http2.PingFrame).Data, data)
		}
	})
	t.Run("settings are acknowledged", func(t *testing.T) {
		c := newRawClient(t, addr)
		c.until("SETTINGS ack", func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && s.IsAck() })
	})
	t.Run("even stream ID", func(t *testing.T) {
		c := newRawClient(t, addr)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
		if code := c.goAway(t); code != http2.ErrCodeProtocol {
			t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", code)
		}
	})
	t.Run("stream IDs going back", func(t *testing.T) {
		c := newRawClient(t, addr)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: c.headerBlock(spawnedMethod), EndHeaders: true})
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: c.headerBlock(spawnedMethod), EndHeaders: true})
		if code := c.goAway(t); code != http2.ErrCodeProtocol {
			t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", code)
		}
	})
	t.Run("send window overflow", func(t *testing.T) {
		c := newRawClient(t, addr)
		_ = c.fr.WriteWindowUpdate(0, 1<<31-1)
		if code := c.goAway(t); code != http2.ErrCodeFlowControl {
			t.Errorf("GOAWAY %v, want FLOW_CONTROL_ERROR", code)
		}
	})
	t.Run("too many streams are refused", func(t *testing.T) {
		c := newRawClient(t, addr)
		for id := uint32(1); id <= 2*maxStreams+1; id += 2 {
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(spawnedMethod), EndHeaders: true})
		}
		f := c.until("RST_STREAM", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok })
		if r := f.(*http2.RSTStreamFrame); r.StreamID != 2*maxStreams+1 || r.ErrCode != http2.ErrCodeRefusedStream {
			t.Errorf("RST_STREAM of stream %d with %v, want stream %d refused", r.StreamID, r.ErrCode, 2*maxStreams+1)
		}
	})
	t.Run("answer flushed while a header block waits for its CONTINUATION", func(t *testing.T) {
		c := newRawClient(t, addr)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
		_ = c.fr.WriteData(1, true, grpcMessage([]byte("e1")))
		block := c.headerBlock(inlineMethod)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block[:2]})
		_ = c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		c.until("the answer to stream 1", func(f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			return ok && h.StreamID == 1 && h.StreamEnded()
		})
		_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_ = c.fr.WriteContinuation(3, true, block[2:])
		_ = c.fr.WriteData(3, true, grpcMessage([]byte("e3")))
		c.until("the answer to stream 3", func(f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			return ok && h.StreamID == 3 && h.StreamEnded()
		})
	})
	t.Run("header list over the limit", func(t *testing.T) {
		c := newRawClient(t, addr)
		c.hbuf.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", inlineMethod}, {":authority", "test"},
			{"content-type", "application/grpc"}} {
			_ = c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		// One field in the HPACK table, repeated by index: a small block
		// that decodes to more than maxHeaderList.
		big := hpack.HeaderField{Name: "x-big", Value: string(bytes.Repeat([]byte("v"), 3000))}
		for range maxHeaderList/3000 + 10 {
			_ = c.henc.WriteField(big)
		}
		if c.hbuf.Len() > maxFrame {
			t.Fatalf("header block of %d bytes, want one frame", c.hbuf.Len())
		}
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true})
		f := c.until("RST_STREAM", func(f http2.Frame) bool {
			if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
				t.Fatal("a request over the header list limit was answered")
			}
			_, ok := f.(*http2.RSTStreamFrame)
			return ok
		})
		if r := f.(*http2.RSTStreamFrame); r.StreamID != 1 || r.ErrCode != http2.ErrCodeFrameSize {
			t.Errorf("RST_STREAM of stream %d with %v, want stream 1 with FRAME_SIZE_ERROR", r.StreamID, r.ErrCode)
		}
	})
	t.Run("a call in raw frames", func(t *testing.T) {
		c := newRawClient(t, addr)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
		_ = c.fr.WriteData(1, true, grpcMessage([]byte("e-raw")))
		var got []byte
		c.until("trailers", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.DataFrame:
				got = append(got, f.Data()...)
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					if s := f.PseudoValue("status"); s != "" && s != "200" {
						t.Errorf(":status %s", s)
					}
					for _, hf := range f.RegularFields() {
						if hf.Name == "grpc-status" && hf.Value != "0" {
							t.Errorf("grpc-status %s", hf.Value)
						}
					}
					return true
				}
			}
			return false
		})
		if want := grpcMessage([]byte("e-raw")); !bytes.Equal(got, want) {
			t.Errorf("answer %x, want %x", got, want)
		}
	})
}

// FuzzConn feeds a connection arbitrary bytes after the client preface:
// the server must neither panic nor hang, and must let go of the
// connection once the client closes it.
func FuzzConn(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	var hbuf bytes.Buffer
	henc := hpack.NewEncoder(&hbuf)
	for _, hf := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", inlineMethod}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"grpc-timeout", "1S"}, {"x-k-bin", "AAE"}} {
		_ = henc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hbuf.Bytes(), EndHeaders: true})
	_ = fr.WriteData(1, true, grpcMessage(bigReq(0, 100)))
	_ = fr.WritePing(false, [8]byte{})
	_ = fr.WriteWindowUpdate(0, 100)
	_ = fr.WriteWindowUpdate(1, 100)
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	f.Add(seed.Bytes())
	f.Add([]byte{})
	f.Add(seed.Bytes()[:len(seed.Bytes())/2])

	s := NewServer(WithInline(func(m string) bool { return m == inlineMethod }))
	s.RegisterService(&testDesc, echoImpl{})
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		c := newConn(s, server)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		served := make(chan struct{})
		go func() { c.serve(); close(served) }()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = client.Write(append([]byte(http2.ClientPreface), in...))
		_ = client.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection was still served 10s after the client closed it")
		}
		s.mu.Lock()
		_, left := s.conns[c]
		s.mu.Unlock()
		if left {
			t.Fatal("the server still holds the closed connection")
		}
	})
}

// Streams reset by the client free their slot only when their handler
// returns: resetting streams does not start handlers without bound (at
// most twice the streams a client may have open).
func TestResetStreamsKeepTheirSlotUntilTheHandlerReturns(t *testing.T) {
	holdGate = make(chan struct{})
	held.Store(0)
	released := false
	release := func() {
		if !released {
			released = true
			close(holdGate)
		}
	}
	defer release()
	s, addr, _ := newTestServer(t, nil)
	c := newRawClient(t, addr)
	const streams = 3 * maxStreams
	for i := range streams {
		id := uint32(2*i + 1)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(spawnedMethod), EndHeaders: true})
		_ = c.fr.WriteData(id, true, grpcMessage([]byte("h")))
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	refused := 0
	c.until("a refusal of each stream over the limit", func(f http2.Frame) bool {
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.ErrCode == http2.ErrCodeRefusedStream {
			refused++
		}
		return refused == streams-2*maxStreams
	})
	if n := held.Load(); n > 2*maxStreams {
		t.Errorf("%d handlers ran at once on one connection; want at most %d", n, 2*maxStreams)
	}
	release()
	// Once the handlers return, the slots are free again.
	waitStreams(t, s.busyStreams, 0)
	id := uint32(2*streams + 1)
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
	_ = c.fr.WriteData(id, true, grpcMessage([]byte("e")))
	c.until("the answer to a stream after the handlers returned", func(f http2.Frame) bool {
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.StreamID == id {
			t.Fatalf("stream refused with %v after the handlers returned", r.ErrCode)
		}
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == id && h.StreamEnded()
	})
}

// A client that stops reading holds up neither the GOAWAY of the other
// connections nor, after Stop, the server.
func TestGracefulStopWithAClientThatDoesNotRead(t *testing.T) {
	s, addr, _ := newTestServer(t, nil)
	stuck := newRawClient(t, addr)
	_ = stuck.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = stuck.fr.WriteWindowUpdate(0, 1<<31-1-65535)
	_ = stuck.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: stuck.headerBlock(spawnedMethod), EndHeaders: true})
	_ = stuck.fr.WriteData(1, true, grpcMessage(bigReq(0, maxBig))) // 8 MiB to a client that reads nothing
	waitStreams(t, s.openStreams, 1)
	time.Sleep(200 * time.Millisecond) // let the answer fill the socket buffers

	healthy := newRawClient(t, addr)
	healthy.until("SETTINGS", func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok })
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	_ = healthy.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	healthy.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	s.Stop()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return after Stop")
	}
}

func TestFrameBuffered(t *testing.T) {
	frame := func(typ http2.FrameType, flags http2.Flags, payload int) []byte {
		b := []byte{byte(payload >> 16), byte(payload >> 8), byte(payload), byte(typ), byte(flags), 0, 0, 0, 1}
		return append(b, make([]byte, payload)...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"nothing", nil, false},
		{"part of a header", frame(http2.FrameData, 0, 1)[:5], false},
		{"header of 1 byte of data without it", frame(http2.FrameData, 0, 1)[:9], false},
		{"1 byte of data", frame(http2.FrameData, 0, 1), true},
		{"6 bytes of data less one", frame(http2.FrameData, 0, 6)[:14], false},
		{"300 bytes of data less one", frame(http2.FrameData, 0, 300)[:308], false},
		{"300 bytes of data", frame(http2.FrameData, 0, 300), true},
		{"a header block with its end", frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 20), true},
		// The reader decodes each fragment as its frame comes.
		{"a header block waiting for CONTINUATION", frame(http2.FrameHeaders, 0, 20), true},
		{"a CONTINUATION less one byte", frame(http2.FrameContinuation, 0, 20)[:28], false},
	} {
		pr, pw := io.Pipe()
		c := &conn{br: bufio.NewReaderSize(pr, 4096)}
		go func() { _, _ = pw.Write(tc.in); _ = pw.Close() }()
		if len(tc.in) > 0 {
			_, _ = c.br.Peek(len(tc.in)) // fill the buffer with all of it
		}
		if got := c.frameBuffered(); got != tc.want {
			t.Errorf("%s: frameBuffered() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A graceful stop serves the calls the client sent before it read the
// GOAWAY: new streams are refused only after the client acknowledged the
// first GOAWAY's PING.
func TestGracefulStopServesCallsInFlight(t *testing.T) {
	s, addr, _ := newTestServer(t, nil)
	c := newRawClient(t, addr)
	// A call in progress keeps the connection open through the stop.
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headerBlock(spawnedMethod), EndHeaders: true})
	_ = c.fr.WriteData(1, true, grpcMessage([]byte("w")))
	waitStreams(t, s.openStreams, 1)
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()

	f := c.until("the first GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	if g := f.(*http2.GoAwayFrame); g.LastStreamID != 1<<31-1 || g.ErrCode != http2.ErrCodeNo {
		t.Fatalf("first GOAWAY: last stream %d, %v; want %d, NO_ERROR", g.LastStreamID, g.ErrCode, 1<<31-1)
	}
	ping := c.until("the GOAWAY's PING", func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() }).(*http2.PingFrame)
	// A call sent before the client read the GOAWAY.
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
	_ = c.fr.WriteData(3, true, grpcMessage([]byte("e3")))
	c.until("the answer to stream 3", func(f http2.Frame) bool {
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.StreamID == 3 {
			t.Fatalf("stream 3, sent before the PING was acknowledged, was reset with %v", r.ErrCode)
		}
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == 3 && h.StreamEnded()
	})
	_ = c.fr.WritePing(true, ping.Data)
	f = c.until("the final GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	if g := f.(*http2.GoAwayFrame); g.LastStreamID != 3 {
		t.Fatalf("final GOAWAY: last stream %d, want 3", g.LastStreamID)
	}
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: c.headerBlock(inlineMethod), EndHeaders: true})
	_ = c.fr.WriteData(5, true, grpcMessage([]byte("e5")))
	f = c.until("the refusal of stream 5", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok })
	if r := f.(*http2.RSTStreamFrame); r.StreamID != 5 || r.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("RST_STREAM of stream %d with %v, want stream 5 refused", r.StreamID, r.ErrCode)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with stream 1 in progress")
	case <-time.After(100 * time.Millisecond):
	}
	_ = c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop did not return after the last call ended")
	}
}
