package hcloudtest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// selectorOp is one of the operators of Hetzner's label selectors, which
// follow Kubernetes' set-based syntax.
type selectorOp int

const (
	opExists selectorOp = iota
	opNotExists
	opEquals
	opNotEquals
	opIn
	opNotIn
)

type requirement struct {
	key    string
	op     selectorOp
	values []string
}

// selector is a parsed label selector: every requirement must hold.
type selector []requirement

var (
	labelNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
	dnsLabelRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// validLabelKey reports whether k is "[prefix/]name" with a DNS-subdomain
// prefix of at most 253 characters and a name of at most 63.
func validLabelKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix {
		if prefix == "" || len(prefix) > 253 {
			return fmt.Errorf("label key %q: prefix must be a DNS subdomain of at most 253 characters", k)
		}
		for part := range strings.SplitSeq(prefix, ".") {
			if !dnsLabelRE.MatchString(part) {
				return fmt.Errorf("label key %q: prefix must be a DNS subdomain", k)
			}
		}
	}
	if !labelNameRE.MatchString(name) {
		return fmt.Errorf("label key %q: name must be 1-63 characters, alphanumeric at both ends, with -_. inside", k)
	}
	return nil
}

func validLabelValue(v string) error {
	if !labelValueRE.MatchString(v) {
		return fmt.Errorf("label value %q: must be at most 63 characters, empty or alphanumeric at both ends, with -_. inside", v)
	}
	return nil
}

// parseSelector parses a label selector such as
// "env=prod,tier in (web,api),!legacy". The empty string selects everything.
func parseSelector(s string) (selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts, err := splitTopLevel(s)
	if err != nil {
		return nil, err
	}
	sel := make(selector, 0, len(parts))
	for _, p := range parts {
		r, err := parseRequirement(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// splitTopLevel splits on the commas that separate requirements, leaving
// the commas inside "in (a,b)" alone.
func splitTopLevel(s string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("nested parenthesis at offset %d", i)
			}
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced parenthesis at offset %d", i)
			}
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed parenthesis")
	}
	return append(parts, s[start:]), nil
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '/'
}

func parseRequirement(p string) (requirement, error) {
	if p == "" {
		return requirement{}, fmt.Errorf("empty requirement")
	}
	if rest, ok := strings.CutPrefix(p, "!"); ok {
		key := strings.TrimSpace(rest)
		if err := validLabelKey(key); err != nil {
			return requirement{}, err
		}
		return requirement{key: key, op: opNotExists}, nil
	}
	i := 0
	for i < len(p) && isKeyChar(p[i]) {
		i++
	}
	key, rest := p[:i], strings.TrimLeft(p[i:], " ")
	if err := validLabelKey(key); err != nil {
		return requirement{}, err
	}
	r := requirement{key: key}
	switch {
	case rest == "":
		r.op = opExists
		return r, nil
	case strings.HasPrefix(rest, "=="):
		r.op, rest = opEquals, rest[2:]
	case strings.HasPrefix(rest, "!="):
		r.op, rest = opNotEquals, rest[2:]
	case strings.HasPrefix(rest, "="):
		r.op, rest = opEquals, rest[1:]
	case strings.HasPrefix(rest, "notin"):
		r.op, rest = opNotIn, rest[len("notin"):]
	case strings.HasPrefix(rest, "in"):
		r.op, rest = opIn, rest[len("in"):]
	default:
		return requirement{}, fmt.Errorf("requirement %q: expected one of =, ==, !=, in, notin after the key", p)
	}
	rest = strings.TrimSpace(rest)
	if r.op == opEquals || r.op == opNotEquals {
		if err := validLabelValue(rest); err != nil {
			return requirement{}, fmt.Errorf("requirement %q: %w", p, err)
		}
		r.values = []string{rest}
		return r, nil
	}
	inner, ok := strings.CutPrefix(rest, "(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return requirement{}, fmt.Errorf("requirement %q: expected a parenthesised value list", p)
	}
	inner = strings.TrimSuffix(inner, ")")
	for v := range strings.SplitSeq(inner, ",") {
		v = strings.TrimSpace(v)
		if err := validLabelValue(v); err != nil {
			return requirement{}, fmt.Errorf("requirement %q: %w", p, err)
		}
		r.values = append(r.values, v)
	}
	return r, nil
}

// matches follows Kubernetes' semantics: "k!=v" and "k notin (..)" also
// hold when the label is absent.
func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, has := labels[r.key]
		ok := false
		switch r.op {
		case opExists:
			ok = has
		case opNotExists:
			ok = !has
		case opEquals:
			ok = has && v == r.values[0]
		case opNotEquals:
			ok = !has || v != r.values[0]
		case opIn:
			ok = has && slices.Contains(r.values, v)
		case opNotIn:
			ok = !has || !slices.Contains(r.values, v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// validateLabels checks labels as the API does on create and update,
// including the reserved hetzner.cloud/ prefix.
func validateLabels(labels map[string]string) []string {
	var problems []string
	for k, v := range labels {
		if err := validLabelKey(k); err != nil {
			problems = append(problems, err.Error())
		}
		if strings.HasPrefix(k, "hetzner.cloud/") {
			problems = append(problems, fmt.Sprintf("label key %q: the prefix hetzner.cloud/ is reserved", k))
		}
		if err := validLabelValue(v); err != nil {
			problems = append(problems, err.Error())
		}
	}
	slices.Sort(problems)
	return problems
}
