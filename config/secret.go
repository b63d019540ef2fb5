package config

import (
	"fmt"
	"log/slog"
	"strconv"
)

// redacted replaces a secret's value wherever it could be printed.
const redacted = "[redacted]"

// String returns "[redacted]", or "" for an empty secret so that "unset" stays
// visible.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from showing the value.
func (s Secret) GoString() string {
	return "config.Secret(" + strconv.Quote(s.String()) + ")"
}

// Format makes every fmt verb print the redacted form: without it, verbs that
// fmt does not route through String (%x, %d, ...) would expose the bytes.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(s.GoString()))
	case verb == 'q':
		_, _ = f.Write([]byte(strconv.Quote(s.String())))
	default:
		_, _ = f.Write([]byte(s.String()))
	}
}

// MarshalJSON marshals the redacted form; it is what zap.Any and other
// reflection-based encoders use.
func (s Secret) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(s.String())), nil
}

// MarshalText marshals the redacted form for text encoders (zap's console
// encoder, encoding/xml, YAML libraries).
func (s Secret) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// LogValue keeps log/slog from showing the value.
func (s Secret) LogValue() slog.Value {
	return slog.StringValue(s.String())
}

// Reveal returns the value. Call it only where the value is sent to its
// destination (the API client, the create request), never for output.
func (s Secret) Reveal() string {
	return string(s)
}
