package externalgrpc

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/pool"
)

// NodeGroupTemplateNodeInfo returns the pool's template node as
// (*v1.Node).Marshal() bytes, the raw protobuf of the type without the
// Kubernetes envelope, in nodeBytes (field 2, read by Cluster Autoscaler
// 1.34.2 and later) and in the legacy nodeInfo (field 1, read by 1.34.1
// and older, where it was an embedded v1.Node: the same bytes on the
// wire). It never answers OK without bytes: the autoscaler would cache a
// nil template and dereference it.
func (s *Server) NodeGroupTemplateNodeInfo(ctx context.Context, req *protos.NodeGroupTemplateNodeInfoRequest) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	node, err := p.TemplateNode(bctx)
	if err != nil {
		return nil, toStatus(err, codes.Internal, "template node")
	}
	b, err := node.Marshal()
	if err != nil {
		return nil, toStatus(err, codes.Internal, "template node: encoding")
	}
	return &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b, NodeInfo: b}, nil
}

// NodeGroupGetOptions answers only for pools that set autoscaling options
// in the cluster config; for the others it is Unimplemented, and the
// autoscaler keeps its flag defaults. The autoscaler's request carries its
// defaults; the answer is those defaults with the pool's settings laid
// over them, every field set, and the three durations in both encodings
// (Cluster Autoscaler 1.34.1 and older dereference the legacy ones without
// a nil check).
func (s *Server) NodeGroupGetOptions(_ context.Context, req *protos.NodeGroupAutoscalingOptionsRequest) (*protos.NodeGroupAutoscalingOptionsResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	o, ok := p.Options(fromProto(req.GetDefaults()))
	if !ok {
		if g := s.group(p.Name()); g != nil {
			return nil, g.noOptions
		}
		return nil, status.Errorf(codes.Unimplemented, "node group %q sets no autoscaling options; the autoscaler's defaults apply", p.Name())
	}
	return &protos.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: toProto(o)}, nil
}

// fromProto reads the autoscaler's defaults. Cluster Autoscaler 1.34.1
// and older send only the legacy durations (nanoseconds); later ones send
// the google.protobuf.Duration fields, which win when both are present.
func fromProto(d *protos.NodeGroupAutoscalingOptions) pool.AutoscalingOptions {
	if d == nil {
		return pool.AutoscalingOptions{}
	}
	return pool.AutoscalingOptions{
		ScaleDownUtilizationThreshold:    d.GetScaleDownUtilizationThreshold(),
		ScaleDownGpuUtilizationThreshold: d.GetScaleDownGpuUtilizationThreshold(),
		ScaleDownUnneededTime:            duration(d.GetScaleDownUnneededDuration(), d.GetScaleDownUnneededTime()),
		ScaleDownUnreadyTime:             duration(d.GetScaleDownUnreadyDuration(), d.GetScaleDownUnreadyTime()),
		MaxNodeProvisionTime:             duration(d.GetMaxNodeProvisionDuration(), d.GetMaxNodeProvisionTime()),
		ZeroOrMaxNodeScaling:             d.GetZeroOrMaxNodeScaling(),
		IgnoreDaemonSetsUtilization:      d.GetIgnoreDaemonSetsUtilization(),
	}
}

func duration(current *durationpb.Duration, legacy *protos.NodeGroupAutoscalingOptions_LegacyDuration) time.Duration {
	if current != nil {
		return current.AsDuration()
	}
	return time.Duration(legacy.GetDuration())
}

// toProto writes every field the protocol has. MaxNodeStartupTime and
// AllowNonAtomicScaleUpToMax have no field, so they cannot reach the
// autoscaler.
func toProto(o *pool.AutoscalingOptions) *protos.NodeGroupAutoscalingOptions {
	legacy := func(d time.Duration) *protos.NodeGroupAutoscalingOptions_LegacyDuration {
		return &protos.NodeGroupAutoscalingOptions_LegacyDuration{Duration: int64(d)}
	}
	return &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: o.ScaleDownGpuUtilizationThreshold,
		ZeroOrMaxNodeScaling:             o.ZeroOrMaxNodeScaling,
		IgnoreDaemonSetsUtilization:      o.IgnoreDaemonSetsUtilization,
		ScaleDownUnneededDuration:        durationpb.New(o.ScaleDownUnneededTime),
		ScaleDownUnreadyDuration:         durationpb.New(o.ScaleDownUnreadyTime),
		MaxNodeProvisionDuration:         durationpb.New(o.MaxNodeProvisionTime),
		ScaleDownUnneededTime:            legacy(o.ScaleDownUnneededTime),
		ScaleDownUnreadyTime:             legacy(o.ScaleDownUnreadyTime),
		MaxNodeProvisionTime:             legacy(o.MaxNodeProvisionTime),
	}
}
