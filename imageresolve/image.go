package imageresolve

import (
	"maps"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

// Image is the part of a Hetzner Cloud image that scaling needs. The
// resolver hands each caller its own copy.
type Image struct {
	ID          int64
	Name        string // empty for snapshots and backups
	Description string
	Type        string // system, snapshot, app or backup
	Arch        config.Arch
	Created     time.Time
	// Deprecated images still create servers, until Hetzner removes them
	// at UnavailableAfter; the resolver logs a warning once per image.
	Deprecated       bool
	UnavailableAfter time.Time // zero when not deprecated or not announced
	Labels           map[string]string
}

func (img *Image) clone() *Image {
	c := *img
	c.Labels = maps.Clone(img.Labels)
	return &c
}

func imageFromHcloud(in *hcloud.Image) *Image {
	img := &Image{
		ID:          in.ID,
		Name:        in.Name,
		Description: in.Description,
		Type:        string(in.Type),
		Arch:        archFromHcloud(in.Architecture),
		Created:     in.Created,
		// Older API responses only carry the deprecated "deprecated"
		// timestamp; newer ones the "deprecation" object. Either counts.
		Deprecated: in.IsDeprecated() || !in.Deprecated.IsZero(),
		Labels:     maps.Clone(in.Labels),
	}
	if in.Deprecation != nil {
		img.UnavailableAfter = in.Deprecation.UnavailableAfter
	}
	return img
}

// hcloudArch maps a Kubernetes architecture name to Hetzner's.
func hcloudArch(arch config.Arch) (hcloud.Architecture, bool) {
	switch arch {
	case config.ArchAMD64:
		return hcloud.ArchitectureX86, true
	case config.ArchARM64:
		return hcloud.ArchitectureARM, true
	default:
		return "", false
	}
}

// archFromHcloud maps Hetzner's architecture name to Kubernetes'. An
// architecture Hetzner adds later passes through unchanged, so that error
// messages still show it.
func archFromHcloud(arch hcloud.Architecture) config.Arch {
	switch arch {
	case hcloud.ArchitectureX86:
		return config.ArchAMD64
	case hcloud.ArchitectureARM:
		return config.ArchARM64
	default:
		return config.Arch(arch)
	}
}
