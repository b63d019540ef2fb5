package imageresolve

import (
	"errors"
	"fmt"

	"github.com/hcloudscale/hcloudscale/config"
)

// ErrClosed is returned by [Resolver.Resolve] after [Resolver.Close].
var ErrClosed = errors.New("image resolver closed")

// MissingSpecError reports that no image is configured for an architecture.
// The resolver never substitutes "the newest snapshot" for a missing spec:
// upstream does, and a stray snapshot in the project then boots nodes.
type MissingSpecError struct {
	Pool string // empty when the spec was passed to Resolve directly
	Arch config.Arch
}

func (e *MissingSpecError) Error() string {
	if e.Pool == "" {
		return fmt.Sprintf("no image for arch %s", e.Arch)
	}
	return fmt.Sprintf("pool %q: no image for arch %s", e.Pool, e.Arch)
}

// NotFoundError reports that no image matches a spec for an architecture.
type NotFoundError struct {
	Spec config.ImageSpec
	Arch config.Arch
	Kind Kind // the first lookup; the later ones follow from it (see Classify)
}

func (e *NotFoundError) Error() string {
	var tried string
	switch e.Kind {
	case KindID:
		tried = "ID, name or label selector"
	case KindName:
		tried = "name or label selector"
	default:
		tried = "label selector (available snapshots only)"
	}
	return fmt.Sprintf("image %q for arch %s: no image matches it as %s", e.Spec, e.Arch, tried)
}

// ArchMismatchError reports that an image ID names an image built for
// another architecture; a server created from it would not boot.
type ArchMismatchError struct {
	Spec config.ImageSpec
	ID   int64
	Got  config.Arch // the image's architecture
	Want config.Arch
}

func (e *ArchMismatchError) Error() string {
	return fmt.Sprintf("image %q for arch %s: image %d is built for arch %s", e.Spec, e.Want, e.ID, e.Got)
}

// UnknownArchError reports an architecture Hetzner Cloud does not offer.
type UnknownArchError struct {
	Arch config.Arch
}

func (e *UnknownArchError) Error() string {
	return fmt.Sprintf("arch %q is not one of %s, %s", e.Arch, config.ArchAMD64, config.ArchARM64)
}

// definitive reports whether err is an answer about the project's images
// (as opposed to a failed request), and so may be cached.
func definitive(err error) bool {
	var nf *NotFoundError
	var am *ArchMismatchError
	return errors.As(err, &nf) || errors.As(err, &am)
}
