package pool

import (
	"context"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
)

// refusedImage reports whether a create request may have failed because
// its image is gone: the API answers invalid_input ("image not found")
// or not_found. Other references of the request fail the same way, so
// the caller checks by resolving the image again.
func refusedImage(err error) bool {
	return hcloud.IsError(err, hcloud.ErrorCodeInvalidInput, hcloud.ErrorCodeNotFound)
}

// retryWithNewImage handles a create that the API refused, possibly for an
// image deleted since it was resolved (a snapshot rotated within the
// resolver's TTL): it drops the cached resolution, resolves again and, if
// that names another image, sends the create once more with it and the
// same server name. Otherwise, or when resolving fails, the create's own
// error stands.
func (p *Pool) retryWithNewImage(ctx context.Context, set *settings, opts hcloud.ServerCreateOpts, cause error, log *zap.Logger) (created, error) {
	if opts.Image == nil || !p.deps.Images.Forget(opts.Image.ID) {
		return created{}, cause
	}
	st, err := p.deps.Types.Lookup(ctx, set.cfg.ServerType)
	if err != nil || st == nil {
		return created{}, cause
	}
	img, err := p.deps.Images.ResolvePool(ctx, &set.cfg, st.Arch)
	if err != nil {
		log.Warn("the create was refused and the pool's image cannot be resolved again", zap.Error(err), zap.NamedError("cause", cause))
		return created{}, cause
	}
	if img.ID == opts.Image.ID {
		return created{}, cause
	}
	log.Info("the create was refused; its image is gone, sending it again with the image resolved now",
		zap.Int64("old_image", opts.Image.ID), zap.Int64("image", img.ID), zap.NamedError("cause", cause))
	opts.Image = &hcloud.Image{ID: img.ID}
	return p.createServer(ctx, opts, log)
}
