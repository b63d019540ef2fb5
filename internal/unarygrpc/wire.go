package unarygrpc

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// parseTimeout reads a grpc-timeout header: at most eight digits and a
// unit (H, M, S, m, u, n).
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, errors.New("not 1 to 8 digits and a unit")
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not 1 to 8 digits and a unit")
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, errors.New("unknown unit")
	}
	if n > int64(1<<63-1)/int64(unit) {
		return 1<<63 - 1, nil
	}
	if n == 0 {
		return time.Nanosecond, nil // already expired: 0 would mean none
	}
	return time.Duration(n) * unit, nil
}

// codeString is a status code as the grpc-status header carries it.
func codeString(c codes.Code) string {
	return strconv.FormatUint(uint64(c), 10)
}

// encodeGrpcMessage percent-encodes what gRPC does not carry verbatim in
// grpc-message: bytes outside printable ASCII, and '%'.
func encodeGrpcMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if b := msg[i]; b < ' ' || b > '~' || b == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		b := msg[i]
		if b < ' ' || b > '~' || b == '%' {
			sb.WriteByte('%')
			sb.WriteByte(hex[b>>4])
			sb.WriteByte(hex[b&15])
			continue
		}
		sb.WriteByte(b)
	}
	return sb.String()
}

// encodeBinHeader and decodeBinHeader carry binary metadata (keys ending
// in "-bin"): base64, sent without padding, read with or without.
func encodeBinHeader(b []byte) string { return base64.RawStdEncoding.EncodeToString(b) }

func decodeBinHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}
