package unarygrpc

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// writeRaw writes one frame as given, which http2.Framer would refuse to
// write.
func (c *rawClient) writeRaw(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), byte(typ), byte(flags), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[5:], id)
	_, _ = c.conn.Write(append(h, payload...))
}

// block encodes fields with the client's HPACK encoder.
func (c *rawClient) block(fields ...[2]string) []byte {
	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return append([]byte(nil), c.hbuf.Bytes()...)
}

// requestFields are a gRPC request's header fields for method, then more.
func requestFields(method string, more ...[2]string) [][2]string {
	return append([][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "test"},
		{"content-type", "application/grpc"}}, more...)
}

// answered waits for the successful answer of stream id.
func (c *rawClient) answered(id uint32) {
	c.t.Helper()
	c.until("the answer", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				c.t.Fatalf("stream %d reset: %v", id, f.ErrCode)
			}
		case *http2.GoAwayFrame:
			c.t.Fatalf("GOAWAY %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamID != id || !f.StreamEnded() {
				return false
			}
			for _, hf := range f.RegularFields() {
				if hf.Name == "grpc-status" && hf.Value != "0" {
					c.t.Fatalf("stream %d: grpc-status %s", id, hf.Value)
				}
			}
			return true
		}
		return false
	})
}

// A HEADERS frame the framer cannot parse (padding beyond its payload) is
// a connection error: its block was never decoded, so the HPACK state is
// lost. The CONTINUATION frames after it must not be decoded into the
// request before, whose handler holds its metadata.
func TestHeadersPaddedBeyondPayload(t *testing.T) {
	reading := make(chan struct{})
	seen := make(chan metadata.MD, 1)
	intercept := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		close(reading)
		time.Sleep(200 * time.Millisecond) // while the frames below arrive
		md, _ := metadata.FromIncomingContext(ctx)
		seen <- md.Copy()
		return h(ctx, req)
	}
	_, addr, _ := newTestServer(t, nil, WithInterceptors(intercept))
	c := newRawClient(t, addr)
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: c.block(requestFields(spawnedMethod, [2]string{"x-key", "stream-1"})...)})
	_ = c.fr.WriteData(1, true, grpcMessage([]byte("e1")))
	<-reading
	c.writeRaw(http2.FrameHeaders, http2.FlagHeadersPadded, 3, []byte{200, 0x82})
	for range 20 {
		c.writeRaw(http2.FrameContinuation, 0, 3, c.block([2]string{"x-key", "injected"}))
	}
	if code := c.goAway(t); code != http2.ErrCodeProtocol {
		t.Errorf("GOAWAY with %v, want PROTOCOL_ERROR", code)
	}
	if md := <-seen; len(md.Get("x-key")) != 1 {
		t.Errorf("stream 1's metadata: x-key %q, want stream-1 only", md.Get("x-key"))
	}
}

// A WINDOW_UPDATE of 0 on a stream stays a stream error.
func TestZeroWindowUpdateResetsTheStream(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)
	c := newRawClient(t, addr)
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: c.block(requestFields(spawnedMethod)...)})
	c.writeRaw(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 0})
	f := c.until("RST_STREAM", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok })
	if r := f.(*http2.RSTStreamFrame); r.StreamID != 1 || r.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("RST_STREAM of stream %d with %v, want stream 1 with PROTOCOL_ERROR", r.StreamID, r.ErrCode)
	}
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, BlockFragment: c.block(requestFields(inlineMethod)...)})
	_ = c.fr.WriteData(3, true, grpcMessage([]byte("e3")))
	c.answered(3)
}

// Header blocks keep the connection's HPACK state in step with the
// client's whatever becomes of them: padded and prioritized, split over
// CONTINUATION frames, refused for a bad field, or a request's trailers.
func TestHeaderBlocksKeepHPACKInStep(t *testing.T) {
	_, addr, _ := newTestServer(t, nil)
	c := newRawClient(t, addr)

	b := c.block(requestFields(inlineMethod)...)
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:3], PadLength: 7, Priority: http2.PriorityParam{Weight: 9}})
	_ = c.fr.WriteContinuation(1, false, b[3:5])
	_ = c.fr.WriteContinuation(1, true, b[5:])
	_ = c.fr.WriteData(1, true, grpcMessage([]byte("e1")))
	c.answered(1)

	// Refused for its control character, but its fields enter the table.
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, EndStream: true,
		BlockFragment: c.block([2]string{"x-added", "1"}, [2]string{"x-ctl", "a\x01"}, [2]string{"x-added2", "2"})})
	c.until("RST_STREAM of stream 3", func(f http2.Frame) bool { r, ok := f.(*http2.RSTStreamFrame); return ok && r.StreamID == 3 })

	// Indexes those entries.
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, EndHeaders: true,
		BlockFragment: c.block(requestFields(inlineMethod, [2]string{"x-added", "1"}, [2]string{"x-added2", "2"})...)})
	_ = c.fr.WriteData(5, true, grpcMessage([]byte("e5")))
	c.answered(5)

	// Trailers after the request's message.
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, EndHeaders: true, BlockFragment: c.block(requestFields(inlineMethod)...)})
	_ = c.fr.WriteData(7, false, grpcMessage([]byte("e7")))
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, EndHeaders: true, EndStream: true, BlockFragment: c.block([2]string{"x-trailer", "t"})})
	c.answered(7)

	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 9, EndHeaders: true,
		BlockFragment: c.block(requestFields(inlineMethod, [2]string{"x-trailer", "t"})...)})
	_ = c.fr.WriteData(9, true, grpcMessage([]byte("e9")))
	c.answered(9)
}
