package nodesim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (s *Server) listNodes(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	list := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
	list.ResourceVersion = fmt.Sprint(s.rv)
	for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
		list.Items = append(list.Items, *s.nodes[name].DeepCopy())
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &list)
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n, ok := s.nodes[r.PathValue("name")]
	if ok {
		n = n.DeepCopy()
	}
	s.mu.Unlock()
	if !ok {
		writeNodeNotFound(w, r.PathValue("name"))
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// patchNode applies a JSON merge patch (RFC 7386) to a node.
func (s *Server) patchNode(w http.ResponseWriter, r *http.Request) {
	var patch any
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &patch)
	}
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the patch is not JSON: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := r.PathValue("name")
	n, ok := s.nodes[name]
	if !ok {
		writeNodeNotFound(w, name)
		return
	}
	var doc any
	raw, err := json.Marshal(n)
	if err == nil {
		err = json.Unmarshal(raw, &doc)
	}
	if err == nil {
		raw, err = json.Marshal(mergePatch(doc, patch))
	}
	next := &corev1.Node{}
	if err == nil {
		err = json.Unmarshal(raw, next)
	}
	if err != nil {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patched node does not decode: "+err.Error())
		return
	}
	next.Name, next.TypeMeta = name, n.TypeMeta
	s.bump(next)
	s.nodes[name] = next
	writeJSON(w, http.StatusOK, next.DeepCopy())
}

// mergePatch applies an RFC 7386 merge patch: objects merge key by key,
// null removes a key, anything else replaces.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = mergePatch(d[k], v)
	}
	return d
}

// emptyList answers a list the simulated cluster has nothing of.
func emptyList(kind, apiVersion string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": map[string]any{}, "items": []any{}})
	}
}

func writeNodeNotFound(w http.ResponseWriter, name string) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("nodes %q not found", name))
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
