package hcloudtest

import (
	"net/http"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// MaxPlacementGroups is how many placement groups a project may hold; a
// create beyond it fails with resource_limit_exceeded.
const MaxPlacementGroups = 50

// ErrorCodeResourceInUse answers the delete of a placement group that
// still has servers.
const ErrorCodeResourceInUse = "resource_in_use"

func handleCreatePlacementGroup(s *Server, r *request) (response, *apiError) {
	var req schema.PlacementGroupCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	var fe fieldErrors
	if req.Name == "" {
		fe.add("name", "is required")
	}
	if req.Type != "spread" {
		fe.add("type", "must be spread")
	}
	labels := map[string]string{}
	if req.Labels != nil {
		labels = *req.Labels
		for _, p := range validateLabels(labels) {
			fe.add("labels", "%s", p)
		}
	}
	if err := fe.err(); err != nil {
		return response{}, err
	}
	for _, pg := range s.st.placementGroups {
		if pg.Name == req.Name {
			return response{}, newError("uniqueness_error", "placement group name %q is already used", req.Name)
		}
	}
	if len(s.st.placementGroups) >= MaxPlacementGroups {
		return response{}, newError("resource_limit_exceeded", "placement group limit exceeded: a project holds at most %d placement groups", MaxPlacementGroups)
	}
	pg := &schema.PlacementGroup{
		ID: s.st.nextID("placement_group"), Name: req.Name, Labels: labels,
		Created: r.now, Servers: []int64{}, Type: "spread",
	}
	s.st.placementGroups[pg.ID] = pg
	return response{status: http.StatusCreated, body: schema.PlacementGroupCreateResponse{PlacementGroup: s.st.renderPlacementGroup(pg)}}, nil
}

func handleDeletePlacementGroup(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	if _, ok := s.st.placementGroups[id]; !ok {
		return response{}, notFound("placement group")
	}
	if n := s.st.placementGroupSize(id); n > 0 {
		e := newError(ErrorCodeResourceInUse, "placement group %d still has %d servers", id, n)
		e.status = http.StatusConflict
		return response{}, e
	}
	delete(s.st.placementGroups, id)
	return response{status: http.StatusNoContent}, nil
}
