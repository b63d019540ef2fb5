package config

import (
	"encoding/base64"
	"encoding/json"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// paths returns the path of every field error in err.
func paths(err error) []string {
	var out []string
	for _, fe := range FieldErrors(err) {
		out = append(out, fe.Path)
	}
	return out
}
