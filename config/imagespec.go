package config

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// maxImageSpecLength bounds an image spec; Hetzner image names and label
// selectors are far shorter.
const maxImageSpecLength = 1024

// CheckImageSpec reports whether s is a well-formed image spec: a numeric
// image ID, an image name, or a Hetzner label selector for snapshots. An
// empty spec is an error here; callers treat it as unset before asking.
//
// A spec that contains a selector operator (=, !, (, ), or a comma) or the
// words in/notin between spaces must parse as a label selector (see
// [CheckLabelSelector]); any other spec is an ID or a name, which must not
// contain whitespace.
func CheckImageSpec(s ImageSpec) error {
	spec := string(s)
	switch {
	case spec == "":
		return errors.New("empty image spec")
	case len(spec) > maxImageSpecLength:
		return fmt.Errorf("image spec is %d characters long, at most %d allowed", len(spec), maxImageSpecLength)
	case strings.TrimSpace(spec) != spec:
		return fmt.Errorf("image spec %q has leading or trailing whitespace", spec)
	case strings.IndexFunc(spec, unicode.IsControl) >= 0:
		return fmt.Errorf("image spec %q contains control characters", spec)
	case isSelector(spec):
		if err := CheckLabelSelector(spec); err != nil {
			return fmt.Errorf("image spec %q is not a valid label selector: %w", spec, err)
		}
	case strings.IndexFunc(spec, unicode.IsSpace) >= 0:
		return fmt.Errorf("image spec %q contains whitespace; an image ID or name has none", spec)
	}
	return nil
}

func isSelector(s string) bool {
	if strings.ContainsAny(s, "=!(),") {
		return true
	}
	f := strings.Fields(s)
	return len(f) > 1 && (f[1] == "in" || f[1] == "notin" || strings.HasPrefix(f[1], "in(") || strings.HasPrefix(f[1], "notin("))
}

// CheckLabelSelector checks the syntax of a Hetzner Cloud label selector:
// requirements separated by commas (all must hold), each one of k=v, k==v,
// k!=v, k, !k, "k in (v1,v2)" or "k notin (v1,v2)", with label key and
// value syntax as in [CheckServerLabel].
func CheckLabelSelector(sel string) error {
	reqs, err := splitTopLevel(sel)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range reqs {
		if err := checkRequirement(strings.TrimSpace(r)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// splitTopLevel splits at commas outside parentheses and checks that the
// parentheses balance without nesting.
func splitTopLevel(s string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if depth > 0 {
				return nil, errors.New("nested parentheses")
			}
			depth++
		case ')':
			if depth == 0 {
				return nil, errors.New("unbalanced ')'")
			}
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unclosed '('")
	}
	return append(parts, s[start:]), nil
}

func checkRequirement(r string) error {
	if r == "" {
		return errors.New("empty requirement")
	}
	if key, ok := strings.CutPrefix(r, "!"); ok {
		return checkSelectorKey(strings.TrimSpace(key))
	}
	for _, op := range []string{"!=", "==", "="} {
		if key, value, ok := strings.Cut(r, op); ok {
			value = strings.TrimSpace(value)
			if strings.ContainsAny(value, "=!()") {
				return fmt.Errorf("requirement %q: unexpected operator in value", r)
			}
			return errors.Join(checkSelectorKey(strings.TrimSpace(key)), checkSelectorValue(value))
		}
	}
	if open := strings.IndexByte(r, '('); open >= 0 {
		head := strings.Fields(r[:open])
		if len(head) != 2 || (head[1] != "in" && head[1] != "notin") {
			return fmt.Errorf("requirement %q: want \"key in (values)\" or \"key notin (values)\"", r)
		}
		if !strings.HasSuffix(r, ")") {
			return fmt.Errorf("requirement %q: text after ')'", r)
		}
		errs := []error{checkSelectorKey(head[0])}
		values := r[open+1 : len(r)-1]
		if strings.TrimSpace(values) == "" {
			errs = append(errs, fmt.Errorf("requirement %q: empty value list", r))
		} else {
			for _, v := range strings.Split(values, ",") {
				errs = append(errs, checkSelectorValue(strings.TrimSpace(v)))
			}
		}
		return errors.Join(errs...)
	}
	if strings.ContainsAny(r, ")") || len(strings.Fields(r)) != 1 {
		return fmt.Errorf("requirement %q: want key=value, key!=value, key, !key, key in (...) or key notin (...)", r)
	}
	return checkSelectorKey(r)
}

func checkSelectorKey(k string) error {
	if k == "" {
		return errors.New("empty label key")
	}
	if err := joinMsgs(content.IsLabelKey(k)); err != nil {
		return fmt.Errorf("label key %q: %w", k, err)
	}
	return nil
}

func checkSelectorValue(v string) error {
	if err := joinMsgs(content.IsLabelValue(v)); err != nil {
		return fmt.Errorf("label value %q: %w", v, err)
	}
	return nil
}
