package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// NodeSpecFormat is the format of a --nodes value.
const NodeSpecFormat = "<min>:<max>:<type>:<location>:<pool>"

// NodeSpec is one parsed --nodes value.
type NodeSpec struct {
	MinSize    int
	MaxSize    int
	ServerType string // lower-case
	Location   string // lower-case
	Name       string // as written
}

// ParseNodeSpec parses a --nodes value "min:max:type:location:name".
//
// As upstream, the value is split into at most five fields (so a colon
// belongs to the name), sizes are decimal integers, and the server type and
// location are lower-cased while the name is kept as written. Unlike
// upstream, it also checks 0 <= min <= max (max 0 parks a pool), and that the name can
// prefix a server name: lower-case letters, digits and '-', starting and
// ending with a letter or digit, at most [MaxPoolNameLength] characters.
// Duplicate names across specs are checked by [Load] and [Config.Validate].
// All problems of the spec are returned joined.
func ParseNodeSpec(s string) (NodeSpec, error) {
	fields := strings.SplitN(s, ":", 5)
	if len(fields) != 5 {
		return NodeSpec{}, fmt.Errorf("%q has %d fields, expected format %s", s, len(fields), NodeSpecFormat)
	}
	var (
		spec NodeSpec
		errs []error
		err  error
	)
	minOK, maxOK := true, true
	if spec.MinSize, err = strconv.Atoi(fields[0]); err != nil {
		errs = append(errs, fmt.Errorf("min size %q is not an integer", fields[0]))
		minOK = false
	}
	if spec.MaxSize, err = strconv.Atoi(fields[1]); err != nil {
		errs = append(errs, fmt.Errorf("max size %q is not an integer", fields[1]))
		maxOK = false
	}
	errs = append(errs, checkSizes(spec.MinSize, minOK, spec.MaxSize, maxOK)...)
	spec.ServerType = strings.ToLower(fields[2])
	spec.Location = strings.ToLower(fields[3])
	spec.Name = fields[4]
	if spec.ServerType == "" {
		errs = append(errs, errors.New("server type is empty"))
	} else if err := checkNoSpace(spec.ServerType); err != nil {
		errs = append(errs, fmt.Errorf("server type %q %w", fields[2], err))
	}
	if spec.Location == "" {
		errs = append(errs, errors.New("location is empty"))
	} else if err := checkNoSpace(spec.Location); err != nil {
		errs = append(errs, fmt.Errorf("location %q %w", fields[3], err))
	}
	if err := CheckPoolName(spec.Name); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return NodeSpec{}, errors.Join(errs...)
	}
	return spec, nil
}

// checkSizes checks the bounds of the sizes that parsed.
func checkSizes(minSize int, minOK bool, maxSize int, maxOK bool) []error {
	var errs []error
	if minOK && minSize < 0 {
		errs = append(errs, fmt.Errorf("min size %d is negative", minSize))
		minOK = false
	}
	// Max size 0 (with min size 0) parks a pool, as upstream allowed.
	if maxOK && maxSize < 0 {
		errs = append(errs, fmt.Errorf("max size %d is negative", maxSize))
		maxOK = false
	}
	if minOK && maxOK && minSize > maxSize {
		errs = append(errs, fmt.Errorf("min size %d is greater than max size %d", minSize, maxSize))
	}
	return errs
}

// checkNoSpace rejects whitespace and control characters in a server type or
// location, which the API would reject only at the first scale-up.
func checkNoSpace(s string) error {
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return errors.New("contains whitespace or control characters")
		}
	}
	return nil
}

// CheckPoolName reports whether name can prefix the servers of a pool:
// "<name>-<up to 16 hex digits>" must be a valid lower-case hostname label
// (RFC 1123), because Hetzner requires valid hostnames and Kubernetes node
// names are lower-case. Upstream accepted '_', '.' and upper case here and
// failed only at scale-up with "invalid input in field 'name'".
func CheckPoolName(name string) error {
	if name == "" {
		return errors.New("pool name is empty")
	}
	var errs []error
	if len(name) > MaxPoolNameLength {
		errs = append(errs, fmt.Errorf("pool name %q is %d characters long, at most %d fit in a server name (<name>-<16 hex digits>, 63 characters)", name, len(name), MaxPoolNameLength))
	}
	if bad := invalidLabelChars(name); bad != "" {
		hint := ""
		if lower := strings.ToLower(name); lower != name && invalidLabelChars(lower) == "" {
			hint = fmt.Sprintf(", did you mean %q", lower)
		}
		errs = append(errs, fmt.Errorf("pool name %q contains %s: only lower-case letters, digits and '-' are allowed%s", name, bad, hint))
	} else if name[0] == '-' || name[len(name)-1] == '-' {
		errs = append(errs, fmt.Errorf("pool name %q must start and end with a letter or digit", name))
	}
	return errors.Join(errs...)
}

// invalidLabelChars lists the characters of s that a lower-case RFC 1123
// label cannot hold, quoted, or returns "".
func invalidLabelChars(s string) string {
	var bad []string
	seen := map[rune]bool{}
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || seen[r] {
			continue
		}
		seen[r] = true
		bad = append(bad, strconv.QuoteRune(r))
	}
	return strings.Join(bad, ", ")
}
