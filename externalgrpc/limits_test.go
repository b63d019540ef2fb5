package externalgrpc_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// A request up to DefaultLimits.MaxRecvMsgSize is served; a larger one
// fails with ResourceExhausted, and the connection keeps serving.
func TestMaxRecvMsgSize(t *testing.T) {
	e := newEnv(t, envOptions{})
	node := func(annotation int) *protos.NodeGroupForNodeRequest {
		return &protos.NodeGroupForNodeRequest{Node: &protos.ExternalGrpcNode{
			ProviderID:  "hcloud://1",
			Name:        "workers-1",
			Annotations: map[string]string{"big": strings.Repeat("x", annotation)},
		}}
	}
	limit := externalgrpc.DefaultLimits.MaxRecvMsgSize
	for _, tc := range []struct {
		name       string
		annotation int
		want       codes.Code
	}{
		{"a node at the API server's annotation limit", 256 << 10, codes.OK},
		{"just below the limit", limit - 64, codes.OK},
		{"above the limit", limit + 1, codes.ResourceExhausted},
		{"after a refused one", 1 << 10, codes.OK},
	} {
		_, err := e.client.NodeGroupForNode(e.ctx(), node(tc.annotation))
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: NodeGroupForNode with a %d-byte annotation: %v; want %v", tc.name, tc.annotation, err, tc.want)
		}
	}
}
