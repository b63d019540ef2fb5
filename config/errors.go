package config

import (
	"errors"
	"fmt"
)

// FieldError is one problem of a configuration, located by its path: an
// environment variable (HCLOUD_PUBLIC_IPV4), a flag (--nodes[2]) or a
// cluster-config JSON path (nodeConfigs.pool1.taints[0].effect).
//
// [Load], [ParseClusterConfig] and [Config.Validate] return every problem at
// once, joined with [errors.Join]; [FieldErrors] lists them.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// FieldErrors flattens an error returned by this package into its field
// errors, in the order they were found. Errors without a path are left out.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// problems collects field errors and warnings while a configuration is read.
type problems struct {
	errs     []error
	warnings []string
}

// has reports whether a problem of path is recorded already.
func (p *problems) has(path string) bool {
	for _, err := range p.errs {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Path == path {
			return true
		}
	}
	return false
}

// add records err under path; a joined error becomes one field error per
// part, so that every line of the final message names its path.
func (p *problems) add(path string, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			p.add(path, e)
		}
		return
	}
	p.errs = append(p.errs, &FieldError{Path: path, Err: err})
}

func (p *problems) addf(path, format string, args ...any) {
	p.add(path, fmt.Errorf(format, args...))
}

func (p *problems) warnf(path, format string, args ...any) {
	p.warnings = append(p.warnings, path+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error { return errors.Join(p.errs...) }
