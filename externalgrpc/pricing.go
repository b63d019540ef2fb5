package externalgrpc

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// PricingNodePrice returns what a node of a pool costs over the interval:
// the hourly net price of the pool's server type in its location times
// the hours ([pool.Pool.Price]). The autoscaler mostly asks for template
// nodes, so the pool is found by the node's provider ID or name, else as
// for a template node ([hcloudscale.Cluster.PoolForTemplateNode]: also a
// copy of a real node whose server is gone), else by its hcloud/node-group
// label. A node of no pool is NotFound; the price expander then skips the
// option.
func (s *Server) PricingNodePrice(_ context.Context, req *protos.PricingNodePriceRequest) (*protos.PricingNodePriceResponse, error) {
	n := req.GetNode()
	if n == nil {
		return nil, status.Error(codes.InvalidArgument, "node is missing")
	}
	start, end, err := interval(req.GetStartTimestamp(), req.GetEndTimestamp(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	p := s.cluster.PoolForNode(n.GetProviderID(), n.GetName())
	if p == nil {
		p = s.cluster.PoolForTemplateNode(n.GetName(), n.GetLabels())
	}
	if p == nil {
		p = s.cluster.Pool(n.GetLabels()[config.LabelNodeGroup])
	}
	if p == nil {
		return nil, status.Errorf(codes.NotFound, "node %q (provider ID %q) belongs to no node group", n.GetName(), n.GetProviderID())
	}
	price, err := p.Price(start, end)
	if err != nil {
		return nil, toStatus(err, codes.Internal, "node price")
	}
	return &protos.PricingNodePriceResponse{Price: price}, nil
}

// PricingPodPrice returns what a pod's requests cost over the interval.
// The autoscaler's price expander divides node prices by pod prices to
// rank options, so the pod price must not depend on the option: it is
// priced at one reference rate for the whole cluster.
//
// The rate comes from the pools: half of a pool's hourly price pays for
// its CPU cores and half for its memory, and the cheapest pool per core
// and the cheapest per GiB set the rates ([PodPrice]). A pod that asks for
// a whole server of the cheapest pool thus costs what that server costs.
// The pod arrives in pod_bytes (Cluster Autoscaler 1.34.2 and later) or
// in the legacy pod field (older ones), as (*v1.Pod).Marshal() bytes.
func (s *Server) PricingPodPrice(ctx context.Context, req *protos.PricingPodPriceRequest) (*protos.PricingPodPriceResponse, error) {
	start, end, err := interval(req.GetStartTimestamp(), req.GetEndTimestamp(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	b := req.GetPodBytes()
	if len(b) == 0 {
		b = req.GetPod()
	}
	if len(b) == 0 {
		return nil, status.Error(codes.InvalidArgument, "pod is missing: neither pod_bytes nor pod is set")
	}
	var pod corev1.Pod
	if err := pod.Unmarshal(b); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "pod: decoding: %v", err)
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	rate, err := s.cluster.PodRate(bctx)
	if err != nil {
		return nil, toStatus(err, codes.Internal, "pod price")
	}
	return &protos.PricingPodPriceResponse{Price: PodPrice(&pod, rate, end.Sub(start))}, nil
}

// interval reads the start and end of a pricing request, preferring the
// google.protobuf.Timestamp fields and falling back to the legacy
// meta.v1.Time ones, which have the same encoding.
func interval(start, end, legacyStart, legacyEnd *timestamppb.Timestamp) (time.Time, time.Time, error) {
	if start == nil {
		start = legacyStart
	}
	if end == nil {
		end = legacyEnd
	}
	if start == nil || end == nil {
		return time.Time{}, time.Time{}, status.Error(codes.InvalidArgument, "start and end time are required")
	}
	if err := start.CheckValid(); err != nil {
		return time.Time{}, time.Time{}, status.Errorf(codes.InvalidArgument, "start time: %v", err)
	}
	if err := end.CheckValid(); err != nil {
		return time.Time{}, time.Time{}, status.Errorf(codes.InvalidArgument, "end time: %v", err)
	}
	s, e := start.AsTime(), end.AsTime()
	if e.Before(s) {
		return time.Time{}, time.Time{}, status.Errorf(codes.InvalidArgument, "end time %s is before start time %s", e.Format(time.RFC3339), s.Format(time.RFC3339))
	}
	return s, e, nil
}

// Rate is the hourly price of one CPU core and of one GiB of memory: the
// Cluster's pod rate ([hcloudscale.Cluster.PodRate]).
type Rate = hcloudscale.PodRate

// PodPrice is what a pod's CPU and memory requests cost at rate for d:
//
//	hours(d) × (CPU cores × rate.PerCore + memory GiB × rate.PerGiB)
//
// The requests are counted as the scheduler counts them
// (k8s.io/component-helpers/resource.PodRequests, as the in-tree adapter
// does): pod-level resources where set, else the larger of the
// containers' sum and each init container's own request, with sidecars
// (init containers that restart always) added to both; plus the pod
// overhead.
func PodPrice(pod *corev1.Pod, rate Rate, d time.Duration) float64 {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cores := float64(req.Cpu().MilliValue()) / 1000
	gib := float64(req.Memory().Value()) / (1 << 30)
	return d.Hours() * (cores*rate.PerCore + gib*rate.PerGiB)
}
