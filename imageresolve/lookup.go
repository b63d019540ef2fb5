package imageresolve

import (
	"context"
	"errors"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

// lookup asks the API, in upstream's order from the spec's kind on: ID,
// then name, then label selector. It costs one request per step tried, so
// at most three.
func (r *Resolver) lookup(ctx context.Context, spec config.ImageSpec, arch config.Arch, hArch hcloud.Architecture) (*Image, error) {
	if r.api == nil {
		return nil, errors.New("image resolver has no image API")
	}
	kind := Classify(spec)

	if kind == KindID {
		id, _ := parseID(string(spec))
		img, _, err := r.api.GetByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("image %q for arch %s: get image by ID: %w", spec, arch, err)
		}
		if img != nil {
			if img.Architecture != hArch {
				return nil, &ArchMismatchError{Spec: spec, ID: img.ID, Got: archFromHcloud(img.Architecture), Want: arch}
			}
			return imageFromHcloud(img), nil
		}
	}

	if kind == KindID || kind == KindName {
		img, _, err := r.api.GetByNameAndArchitecture(ctx, string(spec), hArch)
		if err != nil {
			return nil, fmt.Errorf("image %q for arch %s: get image by name: %w", spec, arch, err)
		}
		if img != nil {
			return imageFromHcloud(img), nil
		}
	}

	imgs, _, err := r.api.List(ctx, hcloud.ImageListOpts{
		// The newest match is all that is needed: one page of one image
		// is one request however many snapshots carry the labels.
		ListOpts:     hcloud.ListOpts{Page: 1, PerPage: 1, LabelSelector: string(spec)},
		Type:         []hcloud.ImageType{hcloud.ImageTypeSnapshot},
		Status:       []hcloud.ImageStatus{hcloud.ImageStatusAvailable},
		Architecture: []hcloud.Architecture{hArch},
		Sort:         []string{"created:desc"},
	})
	if err != nil {
		// A name that is not a valid selector (one starting with "-",
		// say) is rejected by the API; as a fallback that means "no match".
		if kind != KindSelector && hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
			return nil, &NotFoundError{Spec: spec, Arch: arch, Kind: kind}
		}
		return nil, fmt.Errorf("image %q for arch %s: list snapshots by label selector: %w", spec, arch, err)
	}
	if len(imgs) == 0 {
		return nil, &NotFoundError{Spec: spec, Arch: arch, Kind: kind}
	}
	return imageFromHcloud(imgs[0]), nil
}
