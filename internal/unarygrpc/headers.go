package unarygrpc

import (
	"errors"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerDecoder decodes a connection's header blocks (a HEADERS frame and
// the CONTINUATION frames after it) with the connection's HPACK decoder,
// handing each field to field as it is decoded. It checks what
// http2.Framer checks when it decodes them itself (ReadMetaHeaders), with
// the same outcomes:
//   - a field value with control characters, a field name that is not a
//     lower-case token, a pseudo-header field after a regular one, an
//     unknown or repeated pseudo-header field, or request and response
//     pseudo-header fields in one block: a stream error (PROTOCOL_ERROR);
//     no field after the first bad one is handed on;
//   - fields beyond limit (each counts its name, value and 32 bytes; a
//     "trailer" field counts against a budget of its own): the block is
//     truncated and no later field is handed on;
//   - a fragment longer than twice what is left of both budgets, or a
//     CONTINUATION fragment after a bad field: a connection error
//     (PROTOCOL_ERROR), as the framer gives up on decoding such blocks;
//   - HPACK that does not decode: a connection error
//     (COMPRESSION_ERROR).
//
// Decoding here rather than in the framer saves the framer's list of
// fields and its closures: about a third of a call's allocations.
type headerDecoder struct {
	dec   *hpack.Decoder
	field func(name, value string)
	limit uint32

	// The block being decoded.
	remain, trailerRemain uint32
	sawRegular            bool
	pseudo                uint8 // pseudo-header fields seen, as pseudoBit
	bad                   error // the first field that broke the rules
	badPseudo             error // the pseudo-header fields, checked as they come
	truncated             bool
}

func newHeaderDecoder(limit uint32, field func(name, value string)) *headerDecoder {
	h := &headerDecoder{dec: hpack.NewDecoder(4096, nil), field: field, limit: limit}
	h.dec.SetEmitFunc(h.emit)
	h.dec.SetMaxStringLength(int(limit))
	return h
}

// start begins a block.
func (h *headerDecoder) start() {
	h.remain, h.trailerRemain = h.limit, h.limit
	h.sawRegular = false
	h.pseudo = 0
	h.bad, h.badPseudo = nil, nil
	h.truncated = false
	h.dec.SetEmitEnabled(true)
}

// fragment decodes the next fragment of the block; the error is an
// http2.ConnectionError.
func (h *headerDecoder) fragment(frag []byte) error {
	if int64(len(frag)) > 2*int64(h.remain+h.trailerRemain) || h.bad != nil {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if _, err := h.dec.Write(frag); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	return nil
}

// end finishes the block of stream id: truncated reports fields dropped
// beyond the limit; the error is an http2.ConnectionError or an
// http2.StreamError.
func (h *headerDecoder) end(id uint32) (truncated bool, err error) {
	if err := h.dec.Close(); err != nil {
		return false, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if h.bad != nil {
		return false, http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: h.bad}
	}
	if h.badPseudo != nil {
		return false, http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: h.badPseudo}
	}
	return h.truncated, nil
}

var (
	errHeaderValue        = errors.New("invalid header field value")
	errHeaderName         = errors.New("invalid header field name")
	errPseudoAfterRegular = errors.New("pseudo header field after regular")
	errPseudoUnknown      = errors.New("unknown pseudo header field")
	errPseudoRepeated     = errors.New("repeated pseudo header field")
	errPseudoMixed        = errors.New("request and response pseudo header fields")
)

// Pseudo-header fields, as bits of headerDecoder.pseudo.
const (
	pseudoMethod uint8 = 1 << iota
	pseudoPath
	pseudoScheme
	pseudoAuthority
	pseudoProtocol
	pseudoStatus

	pseudoRequest = pseudoMethod | pseudoPath | pseudoScheme | pseudoAuthority | pseudoProtocol
)

func pseudoBit(name string) uint8 {
	switch name {
	case ":method":
		return pseudoMethod
	case ":path":
		return pseudoPath
	case ":scheme":
		return pseudoScheme
	case ":authority":
		return pseudoAuthority
	case ":protocol":
		return pseudoProtocol
	case ":status":
		return pseudoStatus
	}
	return 0
}

func (h *headerDecoder) emit(f hpack.HeaderField) {
	if !validValue(f.Value) {
		h.fail(errHeaderValue)
		return
	}
	pseudo := len(f.Name) > 0 && f.Name[0] == ':'
	if pseudo {
		if h.sawRegular {
			h.fail(errPseudoAfterRegular)
			return
		}
	} else {
		h.sawRegular = true
		if !validName(f.Name) {
			h.fail(errHeaderName)
			return
		}
	}
	budget := &h.remain
	size := f.Size()
	if f.Name == "trailer" {
		budget = &h.trailerRemain
		n := uint32(strings.Count(f.Value, ",") + 1)
		size = uint32(len(f.Value)) - n + 1 + n*hpack.HeaderField{}.Size()
	}
	if size > *budget {
		h.truncated = true
		h.remain, h.trailerRemain = 0, 0
		h.dec.SetEmitEnabled(false)
		return
	}
	*budget -= size
	if pseudo && h.badPseudo == nil {
		// Checked once the field is known to be kept: those over the
		// limit are not.
		switch bit := pseudoBit(f.Name); {
		case bit == 0:
			h.badPseudo = errPseudoUnknown
		case h.pseudo&bit != 0:
			h.badPseudo = errPseudoRepeated
		default:
			h.pseudo |= bit
			if h.pseudo&pseudoStatus != 0 && h.pseudo&pseudoRequest != 0 {
				h.badPseudo = errPseudoMixed
			}
		}
	}
	h.field(f.Name, f.Value)
}

func (h *headerDecoder) fail(err error) {
	h.bad = err
	h.dec.SetEmitEnabled(false)
}

// validValue reports whether v holds no control characters other than
// tab (and no DEL), as HTTP/2 requires of field values.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// tokenChar marks the bytes of a field name: RFC 9110's token characters
// without the upper-case letters.
var tokenChar = func() (t [256]bool) {
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
	}
	for _, b := range "!#$%&'*+-.^_`|~" {
		t[b] = true
	}
	return t
}()

func validName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !tokenChar[v[i]] {
			return false
		}
	}
	return true
}
