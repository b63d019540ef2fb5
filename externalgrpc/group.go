package externalgrpc

import (
	"context"

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
	leave, err := s.enter("increase size")
	if err != nil {
		return nil, err
	}
	defer leave()
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.IncreaseSize(bctx, int(req.GetDelta())); err != nil {
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
	leave, err := s.enter("delete nodes")
	if err != nil {
		return nil, err
	}
	defer leave()
	if len(req.GetNodes()) == 0 {
		return &protos.NodeGroupDeleteNodesResponse{}, nil
	}
	// Each node is named by what matches one of the pool's instances: its
	// provider ID, else its name. The pool checks membership and the min
	// size, all or nothing.
	byID := map[string]bool{}
	for _, in := range p.Instances() {
		byID[in.ID] = true
	}
	ids := make([]string, 0, len(req.GetNodes()))
	for _, n := range req.GetNodes() {
		id := n.GetProviderID()
		if id == "" || !byID[id] {
			id = n.GetName()
		}
		if id == "" {
			return nil, status.Errorf(codes.InvalidArgument, "node group %q: a node has neither a provider ID nor a name", p.Name())
		}
		ids = append(ids, id)
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.DeleteInstances(bctx, ids); err != nil {
		return nil, toStatus(err, codes.Internal, "delete nodes")
	}
	return &protos.NodeGroupDeleteNodesResponse{}, nil
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
	leave, err := s.enter("decrease target size")
	if err != nil {
		return nil, err
	}
	defer leave()
	bctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.DecreaseTargetSize(bctx, int(req.GetDelta())); err != nil {
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
