package pool

import (
	"context"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// ServerAPI is the part of hcloud.ServerClient that a [Pool] uses. Pass
// (*hcloud.Client).Server.
type ServerAPI interface {
	Create(ctx context.Context, opts hcloud.ServerCreateOpts) (hcloud.ServerCreateResult, *hcloud.Response, error)
	DeleteWithResult(ctx context.Context, server *hcloud.Server) (*hcloud.ServerDeleteResult, *hcloud.Response, error)
	AttachToNetwork(ctx context.Context, server *hcloud.Server, opts hcloud.ServerAttachToNetworkOpts) (*hcloud.Action, *hcloud.Response, error)
	Poweron(ctx context.Context, server *hcloud.Server) (*hcloud.Action, *hcloud.Response, error)
	GetByName(ctx context.Context, name string) (*hcloud.Server, *hcloud.Response, error)
	GetByID(ctx context.Context, id int64) (*hcloud.Server, *hcloud.Response, error)
}

var _ ServerAPI = (*hcloud.ServerClient)(nil)

// ServerActionAPI is the part of hcloud-go's server action client that a
// [Pool] uses to read a server's action history. Pass
// (*hcloud.Client).Server.Action.
type ServerActionAPI interface {
	AllFor(ctx context.Context, server *hcloud.Server, opts hcloud.ActionListOpts) ([]*hcloud.Action, error)
}

var _ ServerActionAPI = (*hcloud.ResourceActionClient[*hcloud.Server])(nil)
