package pacer_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/internal/pacer"
)

// The pacer goes into the HTTP client that hcloud-go sends with; hcloud-go's
// instrumentation, if enabled, wraps it from outside.
func ExampleNew() {
	p := pacer.New(http.DefaultTransport, pacer.WithReserve(300), pacer.WithLogger(zap.NewNop()))
	client := hcloud.NewClient(
		hcloud.WithToken("token from HCLOUD_TOKEN"),
		hcloud.WithHTTPClient(&http.Client{Transport: p}),
	)
	_ = client
	// Export p.Stats() as metrics.
}

func ExampleWithPriority() {
	get := func(ctx context.Context) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.hetzner.cloud/v1/servers/42", nil)
		return req
	}
	fmt.Println(pacer.PriorityOf(get(context.Background())))
	// A lookup that a create waits for should not queue behind polls.
	fmt.Println(pacer.PriorityOf(get(pacer.WithPriority(context.Background(), pacer.Foreground))))
	// Output:
	// background
	// foreground
}
