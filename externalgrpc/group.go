package externalgrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/pool"
)

// NodeGroupTargetSize returns the pool's target size, from memory.
func (s *Server) NodeGroupTargetSize(_ context.Context, req *protos.NodeGroupTargetSizeRequest) (*protos.NodeGroupTargetSizeResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupTargetSizeResponse{TargetSize: clampInt32(p.TargetSize())}, nil
}

// NodeGroupIncreaseSize records delta claims and returns; the servers are
// created in the background and show in NodeGroupNodes at once. A delta
// that is not positive or would pass the max size is InvalidArgument; a
// pool whose offering is remembered as sold out is ResourceExhausted.
func (s *Server) NodeGroupIncreaseSize(ctx context.Context, req *protos.NodeGroupIncreaseSizeRequest) (*protos.NodeGroupIncreaseSizeResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	delta := int(req.GetDelta())
	if delta <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "node group %q: size increase must be positive, got %d", p.Name(), delta)
	}
	if target := p.TargetSize(); target+delta > p.MaxSize() {
		return nil, status.Errorf(codes.InvalidArgument, "node group %q: size increase too large: target size %d + %d exceeds max size %d", p.Name(), target, delta, p.MaxSize())
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.IncreaseSize(bctx, delta); err != nil {
		// The check above raced with another increase.
		if target := p.TargetSize(); target+delta > p.MaxSize() {
			return nil, status.Errorf(codes.InvalidArgument, "node group %q: %v", p.Name(), err)
		}
		return nil, toStatus(err, codes.Internal, "increase size")
	}
	return &protos.NodeGroupIncreaseSizeResponse{}, nil
}

// NodeGroupDeleteNodes deletes nodes of the pool. Each node is matched to
// an instance by its provider ID (a server's hcloud://<id> or the claim
// ID of a placeholder, which the autoscaler's fake nodes carry), else by
// its name (the server name). A node of another pool, or of none, is
// InvalidArgument and nothing is deleted; a delete that would take the
// target below the min size is FailedPrecondition (placeholders of failed
// creates do not count, the autoscaler deletes them at any size).
//
// It returns once the API accepted the delete requests; the delete
// actions are awaited in the background.
func (s *Server) NodeGroupDeleteNodes(ctx context.Context, req *protos.NodeGroupDeleteNodesRequest) (*protos.NodeGroupDeleteNodesResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	if len(req.GetNodes()) == 0 {
		return &protos.NodeGroupDeleteNodesResponse{}, nil
	}
	byID := map[string]pool.Instance{}
	byName := map[string]pool.Instance{}
	for _, in := range p.Instances() {
		byID[in.ID] = in
		byName[in.Name] = in
	}
	ids := make([]string, 0, len(req.GetNodes()))
	var unknown []string
	live := 0
	for _, n := range req.GetNodes() {
		in, ok := byID[n.GetProviderID()]
		id := n.GetProviderID()
		if !ok || id == "" {
			in, ok = byName[n.GetName()]
			id = n.GetName()
		}
		if !ok || id == "" {
			unknown = append(unknown, fmt.Sprintf("%q (provider ID %q)", n.GetName(), n.GetProviderID()))
			continue
		}
		ids = append(ids, id)
		if !placeholder(in) {
			live++
		}
	}
	if len(unknown) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "node group %q: nodes %v are not instances of the node group", p.Name(), unknown)
	}
	if target := p.TargetSize(); live > 0 && target-live < p.MinSize() {
		return nil, status.Errorf(codes.FailedPrecondition, "node group %q: deleting %d nodes would take the target size %d below the min size %d", p.Name(), live, target, p.MinSize())
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.DeleteInstances(bctx, ids); err != nil {
		return nil, toStatus(err, codes.Internal, "delete nodes")
	}
	return &protos.NodeGroupDeleteNodesResponse{}, nil
}

// placeholder reports whether an instance is the placeholder of a failed
// create: it holds no capacity.
func placeholder(in pool.Instance) bool {
	return in.State == pool.Creating && in.Error != nil && in.ServerID == 0
}

// NodeGroupDecreaseTargetSize removes pending claims that have no server
// yet. It never fails for a request that is merely too large (the pool
// removes what it can): an error from it aborts the autoscaler's loop. A
// delta that is not negative is InvalidArgument.
func (s *Server) NodeGroupDecreaseTargetSize(ctx context.Context, req *protos.NodeGroupDecreaseTargetSizeRequest) (*protos.NodeGroupDecreaseTargetSizeResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	delta := int(req.GetDelta())
	if delta >= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "node group %q: size decrease must be negative, got %d", p.Name(), delta)
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.DecreaseTargetSize(bctx, delta); err != nil {
		return nil, toStatus(err, codes.Internal, "decrease target size")
	}
	return &protos.NodeGroupDecreaseTargetSizeResponse{}, nil
}

// NodeGroupNodes lists the pool's instances, from memory: servers by their
// provider ID, claims without a server by their claim ID. A failed create
// is an instance in state creating with error info (class 1 for capacity
// errors, 99 otherwise), which makes the autoscaler back the group off and
// delete it.
func (s *Server) NodeGroupNodes(_ context.Context, req *protos.NodeGroupNodesRequest) (*protos.NodeGroupNodesResponse, error) {
	p, err := s.pool(req.GetId())
	if err != nil {
		return nil, err
	}
	instances := p.Instances()
	out := make([]*protos.Instance, 0, len(instances))
	for _, in := range instances {
		out = append(out, instance(in))
	}
	return &protos.NodeGroupNodesResponse{Instances: out}, nil
}

func instance(in pool.Instance) *protos.Instance {
	st := &protos.InstanceStatus{}
	switch in.State {
	case pool.Running:
		st.InstanceState = protos.InstanceStatus_instanceRunning
	case pool.Creating:
		st.InstanceState = protos.InstanceStatus_instanceCreating
	case pool.Deleting:
		st.InstanceState = protos.InstanceStatus_instanceDeleting
	}
	if e := in.Error; e != nil {
		st.ErrorInfo = &protos.InstanceErrorInfo{
			ErrorCode:          e.Code,
			ErrorMessage:       e.Message,
			InstanceErrorClass: int32(e.Class),
		}
	}
	return &protos.Instance{Id: in.ID, Status: st}
}
