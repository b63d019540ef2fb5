package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Redacted replaces the value of every secret field.
const Redacted = "[redacted]"

// secretKeyParts are the parts of a field name that make it secret, after
// the name is lower-cased and stripped of "_", "-" and ".". They cover the
// API's user_data, root_password, password (storage boxes), private_key
// (certificates) and anything a token, secret or credential is put in.
var secretKeyParts = [...]string{
	"password", "passwd", "passphrase",
	"secret", "token", "credential", "apikey",
	"privatekey", "userdata", "authorization", "cookie",
}

// IsSecretKey reports whether a JSON field named key holds a secret: its
// name, lower-cased and stripped of "_", "-" and ".", contains password,
// passwd, passphrase, secret, token, credential, apikey, privatekey,
// userdata, authorization or cookie. So user_data, root_password,
// ssh_private_key, api_token, userData and X-Auth-Token are secret;
// ssh_keys, public_key and labels are not.
func IsSecretKey(key string) bool {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.':
			return -1
		}
		return r
	}, strings.ToLower(key))
	for _, part := range secretKeyParts {
		if strings.Contains(norm, part) {
			return true
		}
	}
	return false
}

// JSON returns body with the value of every secret field ([IsSecretKey]),
// at any depth and whatever its type, replaced by the string [Redacted].
// Everything else is kept in order; the output is compact. A body that is
// not valid JSON gives nil, since nothing in it can be told apart from a
// secret.
func JSON(body []byte) []byte {
	if !json.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep numbers as written
	out := make([]byte, 0, len(body))
	out, err := appendValue(out, dec)
	if err != nil {
		return nil // unreachable for valid JSON; nil is the safe answer
	}
	return out
}

// appendValue copies the next value from dec to out, redacting secret
// fields inside it. Working on tokens keeps the field order, which a
// decode into map[string]any would lose.
func appendValue(out []byte, dec *json.Decoder) ([]byte, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return appendArray(out, dec)
		}
		return appendObject(out, dec)
	case string:
		return appendString(out, v), nil
	case json.Number:
		return append(out, v...), nil
	case bool:
		if v {
			return append(out, "true"...), nil
		}
		return append(out, "false"...), nil
	default: // nil
		return append(out, "null"...), nil
	}
}

func appendObject(out []byte, dec *json.Decoder) ([]byte, error) {
	out = append(out, '{')
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // keys are strings in valid JSON
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, key)
		out = append(out, ':')
		if IsSecretKey(key) {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			out = appendString(out, Redacted)
			continue
		}
		if out, err = appendValue(out, dec); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return append(out, '}'), nil
}

func appendArray(out []byte, dec *json.Decoder) ([]byte, error) {
	out = append(out, '[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = appendValue(out, dec); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, err
	}
	return append(out, ']'), nil
}

func appendString(out []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(out, b...)
}
