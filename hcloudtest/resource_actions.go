package hcloudtest

import (
	"slices"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// A resource's action endpoints (GET /servers/actions and
// /servers/actions/{id}, the same for primary_ips) see the actions that
// concern a resource of their kind; hcloud-go's Server.Action and
// PrimaryIP.Action read them.

func concerns(a *actionRec, kind string) bool {
	return slices.ContainsFunc(a.resources, func(ref schema.ActionResourceReference) bool { return ref.Type == kind })
}

// handleListResourceActions answers GET /<kind>s/actions, filtered by id
// and status; unlike GET /actions it lists without an id filter.
func handleListResourceActions(kind string) handlerFunc {
	return func(s *Server, r *request) (response, *apiError) {
		want, err := idFilter(r)
		if err != nil {
			return response{}, err
		}
		statuses := r.query["status"]
		var list []*actionRec
		for _, a := range s.st.actions {
			if concerns(a, kind) && (len(want) == 0 || want[a.id]) && (len(statuses) == 0 || slices.Contains(statuses, a.status)) {
				list = append(list, a)
			}
		}
		return actionPage(r, list)
	}
}

// handleGetResourceAction answers GET /<kind>s/actions/{id}: an action
// that does not concern a resource of the kind is not found there.
func handleGetResourceAction(kind string) handlerFunc {
	return func(s *Server, r *request) (response, *apiError) {
		id, err := pathID(r, "id")
		if err != nil {
			return response{}, err
		}
		a, ok := s.st.actions[id]
		if !ok || !concerns(a, kind) {
			return response{}, notFound("action")
		}
		return ok200(schema.ActionGetResponse{Action: a.schema(r.now)}), nil
	}
}

// concernsResource reports whether a concerns the resource kind/id.
func concernsResource(a *actionRec, kind string, id int64) bool {
	return slices.ContainsFunc(a.resources, func(ref schema.ActionResourceReference) bool {
		return ref.Type == kind && ref.ID == id
	})
}

// resourceExists reports whether the project has the resource kind/id,
// for the actions endpoints of one resource.
func (st *state) resourceExists(kind string, id int64) bool {
	switch kind {
	case "server":
		_, ok := st.servers[id]
		return ok
	case "primary_ip":
		_, ok := st.primaryIPs[id]
		return ok
	}
	return false
}

// resourceFromPath reads the {id} of GET /<kind>s/{id}/actions[/...].
func (s *Server) resourceFromPath(r *request, kind string) (int64, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return 0, err
	}
	if !s.st.resourceExists(kind, id) {
		return 0, notFound(strings.ReplaceAll(kind, "_", " "))
	}
	return id, nil
}

// handleListActionsOf answers GET /<kind>s/{id}/actions: the actions that
// concern the resource, in ID order unless sorted, filtered by status, as
// the API keeps them (until [Server.ForgetActions]).
func handleListActionsOf(kind string) handlerFunc {
	return func(s *Server, r *request) (response, *apiError) {
		id, err := s.resourceFromPath(r, kind)
		if err != nil {
			return response{}, err
		}
		statuses := r.query["status"]
		var list []*actionRec
		for _, a := range s.st.actions {
			if concernsResource(a, kind, id) && (len(statuses) == 0 || slices.Contains(statuses, a.status)) {
				list = append(list, a)
			}
		}
		return actionPage(r, list)
	}
}

// handleGetActionOf answers GET /<kind>s/{id}/actions/{action_id}: an
// action of another resource is not found there.
func handleGetActionOf(kind string) handlerFunc {
	return func(s *Server, r *request) (response, *apiError) {
		id, err := s.resourceFromPath(r, kind)
		if err != nil {
			return response{}, err
		}
		actionID, err := pathID(r, "action_id")
		if err != nil {
			return response{}, err
		}
		a, ok := s.st.actions[actionID]
		if !ok || !concernsResource(a, kind, id) {
			return response{}, notFound("action")
		}
		return ok200(schema.ActionGetResponse{Action: a.schema(r.now)}), nil
	}
}
