package imageresolve

import (
	"strconv"
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
)

// Select returns the image spec a pool uses for arch: the pool's own
// imagesForArch entry, else the global imagesForArch entry, else fallback
// (HCLOUD_IMAGE). Each architecture is decided on its own, so a pool that
// only overrides amd64 still inherits the global arm64 image; upstream
// replaces the whole global object instead, which leaves the other
// architecture without an image. Select returns "" when nothing is set or
// arch is unknown; [Resolver.ResolvePool] turns that into an error.
func Select(pool, global config.ImagesForArch, fallback config.ImageSpec, arch config.Arch) config.ImageSpec {
	if s := pool.ForArch(arch); s != "" {
		return s
	}
	if s := global.ForArch(arch); s != "" {
		return s
	}
	if !knownArch(arch) {
		return ""
	}
	return fallback
}

func knownArch(arch config.Arch) bool {
	return arch == config.ArchAMD64 || arch == config.ArchARM64
}

// Kind is the first lookup a spec gets. See [Classify].
type Kind int

// The kinds of image spec.
const (
	KindEmpty    Kind = iota // no spec: always an error, never "the newest snapshot"
	KindID                   // a numeric image ID
	KindName                 // an image name such as ubuntu-24.04
	KindSelector             // a label selector for snapshots
)

func (k Kind) String() string {
	switch k {
	case KindEmpty:
		return "empty"
	case KindID:
		return "ID"
	case KindName:
		return "name"
	case KindSelector:
		return "label selector"
	default:
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// selectorOnly holds the characters that only the label selector syntax
// uses (k=v, k!=v, !k, k in (a,b), a,b); no image name contains them.
const selectorOnly = "=!,() \t"

// Classify says which lookup a spec gets first. A spec of ASCII digits that
// fits an int64 is an image ID. A spec containing label selector syntax
// ("=", "!", ",", parentheses or spaces) is a label selector. Anything else
// is a name.
//
// The resolver follows upstream's order from the first lookup on: an ID that
// matches no image is tried as a name, and a name that matches no image is
// tried as a label selector (a bare key such as "golden" selects the
// snapshots carrying that label). A selector is never tried as a name,
// which saves a request that could not succeed.
func Classify(spec config.ImageSpec) Kind {
	s := string(spec)
	switch {
	case s == "":
		return KindEmpty
	case isID(s):
		return KindID
	case strings.ContainsAny(s, selectorOnly):
		return KindSelector
	default:
		return KindName
	}
}

func isID(s string) bool {
	_, ok := parseID(s)
	return ok
}

// parseID parses s as an image ID. Unlike a bare strconv.ParseInt it rejects
// signs, so "-1" and "+1" are names, as is a number too large for an int64.
func parseID(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}
