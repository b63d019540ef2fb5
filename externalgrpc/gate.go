package externalgrpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Gate decides whether this server may change the cluster, for replicas
// of which only one (the leader) may. The Server asks it at the start of
// every call that changes servers or claims (NodeGroupIncreaseSize,
// NodeGroupDeleteNodes, NodeGroupDecreaseTargetSize) and of Refresh.
type Gate interface {
	// Enter returns a function to call when the change has been made, or
	// an error saying why this replica may not make it. A Gate that is
	// about to close must wait for the entered calls to leave first, so
	// that no change starts after it closed.
	Enter() (leave func(), err error)
}

// WithGate makes the server refuse changes that g does not let in. A
// refused call gets Unavailable and changes nothing:
//
//   - Refresh is refused too. The autoscaler calls it first in every
//     loop and abandons the loop when it fails, before it decides any
//     scale-up or scale-down; the next loop asks again. A standby thus
//     never causes a failed scale-up or a backed-off node group.
//   - The calls that read (NodeGroups, NodeGroupNodes,
//     NodeGroupTargetSize, NodeGroupForNode, templates, options, prices)
//     are answered from this replica's own listing.
//
// Without WithGate every call is let in.
func WithGate(g Gate) Option {
	return func(o *options) { o.gate = g }
}

// enter asks the gate, if any, to let a change in; the error is the
// status to answer with.
func (s *Server) enter(what string) (func(), error) {
	if s.gate == nil {
		return func() {}, nil
	}
	leave, err := s.gate.Enter()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "%s: %v", what, err)
	}
	return leave, nil
}
