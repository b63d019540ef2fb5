package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The cluster config is decoded level by level instead of with
// json.Decoder.DisallowUnknownFields, which names neither the path nor the
// key's position, and matches keys case-insensitively without a word.

// jsonKind names the JSON type of raw for error messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// childPath appends an object key to path: pool1 as ".pool1", a label key
// such as node.kubernetes.io/role as `["node.kubernetes.io/role"]`.
func childPath(path, key string) string {
	simple := key != ""
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			simple = false
			break
		}
	}
	switch {
	case !simple:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	default:
		return path + "." + key
	}
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// members calls fn for each member of the JSON object raw in document
// order. It reports a value that is not an object and duplicate keys, which
// encoding/json would silently resolve to the last one.
func (p *problems) members(path string, raw json.RawMessage, fn func(key string, raw json.RawMessage)) bool {
	if jsonKind(raw) != "an object" {
		p.addf(path, "want an object, got %s", jsonKind(raw))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		p.add(path, err)
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.add(path, err)
			return false
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			p.add(childPath(path, key), err)
			return false
		}
		if seen[key] {
			p.addf(childPath(path, key), "duplicate key")
			continue
		}
		seen[key] = true
		fn(key, value)
	}
	return true
}

// fields decodes a JSON object with a fixed set of keys: each known key's
// value goes to its handler (null counts as absent), an unknown key is an
// error that suggests the closest known key.
//
// A key that matches exactly one known key except for case is taken for
// it, with a warning naming the canonical spelling: upstream decoded with
// encoding/json, which matches keys case-insensitively, so "NodeConfigs"
// worked there. Two keys of one object that name the same known key
// ("taints" and "Taints") are an error, since upstream silently used one
// of them.
func (p *problems) fields(path string, raw json.RawMessage, handlers map[string]func(path string, raw json.RawMessage)) {
	p.fieldsWith(path, raw, handlers, keyRules{})
}

// keyRules adjust how fieldsWith matches keys.
type keyRules struct {
	// exactCase refuses a key in another case (with a suggestion) instead
	// of matching it with a warning: for objects upstream never had, where
	// no configuration relies on case-insensitive matching.
	exactCase bool
	// elsewhere names where keys that belong to another object go, so that
	// such a key here is an error that points there.
	elsewhere map[string]string
}

// fieldsWith is fields with rules.
func (p *problems) fieldsWith(path string, raw json.RawMessage, handlers map[string]func(path string, raw json.RawMessage), rules keyRules) {
	known := make([]string, 0, len(handlers))
	var listed []string // what an unknown key's message offers: no upstream internals
	for k := range handlers {
		known = append(known, k)
		if !internalKeys[k] {
			listed = append(listed, k)
		}
	}
	sort.Strings(known)
	sort.Strings(listed)
	spelt := map[string]string{} // canonical key -> the key as written
	p.members(path, raw, func(key string, value json.RawMessage) {
		h, ok := handlers[key]
		canonical := key
		if !ok && !rules.exactCase {
			if c := foldMatch(key, known); c != "" {
				h, ok, canonical = handlers[c], true, c
			}
		}
		if !ok {
			for k, where := range rules.elsewhere {
				if strings.EqualFold(k, key) {
					p.addf(childPath(path, key), "not a setting here: %s", where)
					return
				}
			}
			if c := foldMatch(key, known); c != "" {
				p.addf(childPath(path, key), "unknown key, did you mean %q (keys new in hcloudscale are matched in their case only)", c)
			} else if s := suggest(key, listed); s != "" {
				p.addf(childPath(path, key), "unknown key, did you mean %q", s)
			} else {
				p.addf(childPath(path, key), "unknown key, want one of %s", strings.Join(listed, ", "))
			}
			return
		}
		if first, dup := spelt[canonical]; dup {
			p.addf(childPath(path, key), "%q and %q differ only in case and both mean %q; write it once", first, key, canonical)
			return
		}
		spelt[canonical] = key
		if key != canonical {
			p.warnf(childPath(path, key), "key matched %q ignoring case, as upstream did; write %q", canonical, canonical)
		}
		if isNull(value) {
			return
		}
		h(childPath(path, key), value)
	})
}

// internalKeys are keys that are accepted (and ignored) for upstream's
// sake but never offered for an unknown key: upstream's internal fields.
var internalKeys = map[string]bool{"isUsingNewFormat": true, "legacyConfig": true}

// foldMatch returns the one known key that equals key ignoring case, or ""
// when none or more than one does.
func foldMatch(key string, known []string) string {
	match := ""
	for _, k := range known {
		if strings.EqualFold(k, key) {
			if match != "" {
				return ""
			}
			match = k
		}
	}
	return match
}

func (p *problems) str(path string, raw json.RawMessage) (string, bool) {
	var s string
	if jsonKind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		p.addf(path, "want a string, got %s", jsonKind(raw))
		return "", false
	}
	return s, true
}

func (p *problems) boolean(path string, raw json.RawMessage) (bool, bool) {
	var b bool
	if jsonKind(raw) != "a boolean" || json.Unmarshal(raw, &b) != nil {
		p.addf(path, "want true or false, got %s", jsonKind(raw))
		return false, false
	}
	return b, true
}

func (p *problems) integer(path string, raw json.RawMessage) (int, bool) {
	s := string(bytes.TrimSpace(raw))
	if jsonKind(raw) != "a number" {
		p.addf(path, "want an integer, got %s", jsonKind(raw))
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		p.addf(path, "want an integer, got %s", s)
		return 0, false
	}
	return n, true
}

func (p *problems) number(path string, raw json.RawMessage) (float64, bool) {
	s := string(bytes.TrimSpace(raw))
	if jsonKind(raw) != "a number" {
		p.addf(path, "want a number, got %s", jsonKind(raw))
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.addf(path, "want a number, got %s", s)
		return 0, false
	}
	return f, true
}

// stringMap decodes an object of strings.
func (p *problems) stringMap(path string, raw json.RawMessage) map[string]string {
	m := map[string]string{}
	p.members(path, raw, func(key string, value json.RawMessage) {
		if s, ok := p.str(childPath(path, key), value); ok {
			m[key] = s
		}
	})
	return m
}

// array calls fn for each element of the JSON array raw.
func (p *problems) array(path string, raw json.RawMessage, fn func(path string, raw json.RawMessage)) {
	var elems []json.RawMessage
	if jsonKind(raw) != "an array" || json.Unmarshal(raw, &elems) != nil {
		p.addf(path, "want an array, got %s", jsonKind(raw))
		return
	}
	for i, e := range elems {
		fn(indexPath(path, i), e)
	}
}

// checkSyntax reports a JSON syntax error with its line and column, and
// content after the document.
func checkSyntax(data []byte) error {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return errors.New("starts with a UTF-8 byte order mark (BOM), which JSON does not allow: save the file as UTF-8 without BOM")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	err := dec.Decode(&v)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			return fmt.Errorf("invalid JSON: content after the document at offset %d", dec.InputOffset())
		}
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		hint := ""
		if strings.Contains(se.Error(), "invalid character '/'") {
			// The upstream README's example carries // comments.
			hint = " (JSON has no comments: remove the // ones, as in the upstream README's example)"
		}
		return fmt.Errorf("invalid JSON at line %d, column %d: %s%s", line, col, se.Error(), hint)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// suggest returns the known key that key most likely misspells: one that
// differs in case, punctuation, or by at most two edits; or "".
func suggest(key string, known []string) string {
	norm := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	nk := norm(key)
	for _, k := range known {
		if norm(k) == nk {
			return k
		}
	}
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist && len(k) > d*2 {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
