package redact

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzJSON checks JSON against a plain tree walk: it never panics, gives
// nil exactly for invalid JSON, and otherwise means the same document
// with every secret field replaced; and a secret put under secret fields
// of a document never shows in the output.
func FuzzJSON(f *testing.F) {
	for _, seed := range []struct{ body, secret string }{
		{`{"name":"pool1-abc","user_data":"#cloud-config\nruncmd: [kubeadm join]","labels":{"a":"b"}}`, "abcdef.0123456789abcdef"},
		{`{"server":{"id":42},"root_password":"YItygq1v3GYjjMomLaKc","action":{"id":1}}`, "YItygq1v3GYjjMomLaKc"},
		{`{"a":[{"b":{"token":"t1"}},{"password":null}],"c":[[{"private_key":{"x":1}}]]}`, "t1"},
		{`{"us\u0065r_data":"x","tok\u0065n":"y"}`, "x"},
		{`[1,-2.5e10,true,false,null,"s",{},[]]`, `quote " and \ backslash`},
		{`{"token":"a","token":"b"}`, "\u2028<&>"},
		{`{"user_data":"abc"`, "abc"},
		{`not json`, ""},
		{``, "[redacted]"},
		{`[[[[[[[[[[{"secret":1}]]]]]]]]]]`, "1"},
	} {
		f.Add([]byte(seed.body), seed.secret)
	}
	f.Fuzz(func(t *testing.T, body []byte, secret string) {
		got := JSON(body)
		if valid := json.Valid(body); valid != (got != nil) {
			t.Fatalf("JSON(%q) = %q; input valid = %v, so want nil exactly when invalid", body, got, valid)
		}
		if got != nil {
			if !json.Valid(got) {
				t.Fatalf("JSON(%q) = %q, which is not valid JSON", body, got)
			}
			want := redactTree(decode(t, body))
			if diff := cmp.Diff(want, decode(t, got)); diff != "" {
				t.Fatalf("JSON(%q) = %q, which means (-want +got):\n%s", body, got, diff)
			}
		}

		// A document with the secret only under secret fields, and the
		// fuzzed body beside it when it is valid JSON.
		payload := json.RawMessage("null")
		if json.Valid(body) {
			payload = body
		}
		doc, err := json.Marshal(map[string]any{
			"user_data": secret,
			"servers":   []any{map[string]any{"root_password": secret, "name": "pool1-abc"}},
			"payload":   payload,
		})
		if err != nil {
			t.Fatal(err)
		}
		out := JSON(doc)
		enc, _ := json.Marshal(secret)
		inner := enc[1 : len(enc)-1] // as it would appear inside any JSON string
		// Only a secret that the redacted document holds anyway (in the
		// fuzzed payload, or as a piece of the skeleton) may show.
		clean, _ := json.Marshal(map[string]any{
			"user_data": Redacted,
			"servers":   []any{map[string]any{"root_password": Redacted, "name": "pool1-abc"}},
			"payload":   json.RawMessage(orNull(JSON(payload))),
		})
		if len(inner) > 0 && !bytes.Contains(clean, inner) && bytes.Contains(out, inner) {
			t.Fatalf("JSON(%s) = %s; holds the secret %q", doc, out, secret)
		}
	})
}

func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// redactTree is the reference: the meaning JSON must keep.
func redactTree(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			if IsSecretKey(k) {
				out[k] = Redacted
			} else {
				out[k] = redactTree(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, val := range v {
			out[i] = redactTree(val)
		}
		return out
	default:
		return v
	}
}
