package hcloudtest

import (
	"slices"

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
