package unarygrpc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerOutcome is what a header block came to: the fields handed on, or
// the error's kind and code.
type headerOutcome struct {
	fields    []hpack.HeaderField
	truncated bool
	err       string // "", "connection CODE" or "stream CODE"
}

func (o headerOutcome) String() string {
	return fmt.Sprintf("fields %v truncated %v err %q", o.fields, o.truncated, o.err)
}

func errKind(err error) string {
	var ce http2.ConnectionError
	var se http2.StreamError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return "connection " + http2.ErrCode(ce).String()
	case errors.As(err, &se):
		return "stream " + se.Code.String()
	}
	return "other " + err.Error()
}

// headerBlocks splits a fuzz input into header blocks of fragments: each
// fragment is a byte (its length in the low 7 bits, the end of its block
// in the high bit) and that many bytes.
func headerBlocks(in []byte) [][][]byte {
	var blocks [][][]byte
	var cur [][]byte
	for len(in) > 0 {
		n, end := int(in[0]&0x7f), in[0]&0x80 != 0
		in = in[1:]
		n = min(n, len(in))
		cur = append(cur, in[:n])
		in = in[n:]
		if end || len(in) == 0 {
			blocks = append(blocks, cur)
			cur = nil
		}
	}
	return blocks
}

// viaFramer decodes the blocks as http2.Framer does with ReadMetaHeaders,
// on one connection, until an error of the connection.
func viaFramer(t testing.TB, limit uint32, blocks [][][]byte) []headerOutcome {
	var wire bytes.Buffer
	w := http2.NewFramer(&wire, nil)
	for i, b := range blocks {
		id := uint32(2*i + 1)
		if err := w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[0], EndHeaders: len(b) == 1}); err != nil {
			t.Fatal(err)
		}
		for j, frag := range b[1:] {
			if err := w.WriteContinuation(id, j == len(b)-2, frag); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := http2.NewFramer(nil, &wire)
	r.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.MaxHeaderListSize = limit
	var out []headerOutcome
	for range blocks {
		f, err := r.ReadFrame()
		if err != nil {
			out = append(out, headerOutcome{err: errKind(err)})
			if _, ok := errors.AsType[http2.StreamError](err); !ok {
				break
			}
			continue
		}
		mh := f.(*http2.MetaHeadersFrame)
		out = append(out, headerOutcome{fields: mh.Fields, truncated: mh.Truncated})
	}
	return out
}

// viaDecoder decodes the blocks with headerDecoder, as a connection does.
func viaDecoder(limit uint32, blocks [][][]byte) []headerOutcome {
	var got []hpack.HeaderField
	h := newHeaderDecoder(limit, func(name, value string) {
		got = append(got, hpack.HeaderField{Name: name, Value: value})
	})
	var out []headerOutcome
	for i, b := range blocks {
		h.start()
		got = nil
		var err error
		for _, frag := range b {
			if err = h.fragment(frag); err != nil {
				break
			}
		}
		var truncated bool
		if err == nil {
			truncated, err = h.end(uint32(2*i + 1))
		}
		if err != nil {
			out = append(out, headerOutcome{err: errKind(err)})
			if _, ok := errors.AsType[http2.StreamError](err); !ok {
				break
			}
			continue
		}
		out = append(out, headerOutcome{fields: got, truncated: truncated})
	}
	return out
}

func checkSameAsFramer(t *testing.T, limit uint32, in []byte) {
	blocks := headerBlocks(in)
	want := viaFramer(t, limit, blocks)
	got := viaDecoder(limit, blocks)
	if len(got) != len(want) {
		t.Fatalf("%d outcomes, the framer's %d:\n got  %v\n want %v", len(got), len(want), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.err != w.err || g.truncated != w.truncated || len(g.fields) != len(w.fields) {
			t.Fatalf("block %d: %v, the framer: %v", i, g, w)
		}
		for j := range w.fields {
			if g.fields[j].Name != w.fields[j].Name || g.fields[j].Value != w.fields[j].Value {
				t.Fatalf("block %d: %v, the framer: %v", i, g, w)
			}
		}
	}
}

// frags turns header blocks into the input of headerBlocks, each block
// cut into fragments of at most size bytes.
func frags(size int, blocks ...[]byte) []byte {
	var out []byte
	for _, b := range blocks {
		for {
			n := min(len(b), size, 0x7f)
			head := byte(n)
			if n == len(b) {
				head |= 0x80
			}
			out = append(out, head)
			out = append(out, b[:n]...)
			b = b[n:]
			if len(b) == 0 {
				break
			}
		}
	}
	return out
}

// encodeBlocks encodes header lists with one HPACK encoder, as a client
// does on one connection; a field named "!sensitive" makes the next one
// never indexed.
func encodeBlocks(lists ...[][2]string) [][]byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	var out [][]byte
	for _, l := range lists {
		buf.Reset()
		for _, f := range l {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		out = append(out, bytes.Clone(buf.Bytes()))
	}
	return out
}

func headerSeeds() [][]byte {
	call := [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/clustermanager.cloudprovider.v1.externalgrpc.CloudProvider/NodeGroupForNode"},
		{":authority", "127.0.0.1:8086"}, {"content-type", "application/grpc"}, {"user-agent", "grpc-go/1.75.0"}, {"te", "trailers"}, {"grpc-timeout", "4999981u"}}
	withTimeout := func(v string) [][2]string {
		l := append([][2]string(nil), call...)
		l[len(l)-1][1] = v
		return l
	}
	long := strings.Repeat("v", 150)
	lists := [][][2]string{
		call, withTimeout("4999977u"), withTimeout("4999960u"),
		{{":method", "POST"}, {"x-meta", "a"}, {":path", "/s/M"}}, // pseudo after regular
		{{":method", "POST"}, {":method", "POST"}},                // repeated
		{{":method", "POST"}, {":status", "200"}},                 // mixed
		{{":bogus", "1"}},                                                   // unknown
		{{":path", "/s/M"}, {"X-Upper", "1"}},                               // bad name
		{{":path", "/s/M"}, {"x-ctl", "a\x01b"}},                            // bad value
		{{":path", "/s/M"}, {"x-tab", "a\tb\x80"}},                          // fine
		{{":path", "/s/M"}, {"trailer", "a, b,c"}, {"x-long", long}},        // a budget of its own
		{{":path", "/s/M"}, {"x-long", long}, {"x-long", long}, {"x", "y"}}, // over a small limit
		{{"", "empty name"}},
		{{":path", "/s/M"}, {"trailer", "a,b"}, {"x-y", "0123456789"}}, // within 120 only on budgets of their own
	}
	var seeds [][]byte
	for _, l := range lists {
		seeds = append(seeds, frags(1000, encodeBlocks(l)...))
	}
	all := encodeBlocks(lists...)
	seeds = append(seeds, frags(1000, all...), frags(7, all...), frags(1, all[:3]...))
	// A bad field, then a CONTINUATION.
	seeds = append(seeds, frags(3, encodeBlocks([][2]string{{"X-Upper", "1"}, {":path", "/s/M"}, {"x", "y"}})...))
	// A table size update, a literal cut inside a fragment, an index
	// beyond the table, a truncated integer.
	seeds = append(seeds, frags(100, []byte{0x3f, 0xe1, 0x1f, 0x82}), []byte{0x83, 0x40, 0x05, 'a'}, frags(100, []byte{0xff, 0x00}), frags(100, []byte{0x7f}))
	return seeds
}

// The header decoder comes to what http2.Framer comes to with
// ReadMetaHeaders on the same header blocks: the same fields, truncation,
// stream errors and connection errors, with limits small enough to
// truncate and to refuse fragments.
func TestHeaderDecoderAgreesWithFramer(t *testing.T) {
	for _, in := range headerSeeds() {
		for _, limit := range []uint32{maxHeaderList, 400, 120, 40} {
			checkSameAsFramer(t, limit, in)
		}
	}
}

func FuzzHeaderDecoder(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(uint16(400), s)
	}
	f.Fuzz(func(t *testing.T, limit uint16, in []byte) {
		checkSameAsFramer(t, uint32(limit)+1, in)
	})
}
