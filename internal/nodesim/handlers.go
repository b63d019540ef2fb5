package nodesim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
		s.watchNodes(w, r)
		return
	}
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

// watchNodes streams the changes after the resourceVersion asked for,
// from the start with none (an ADDED event for each node first, as a
// Kubernetes API does), until the request ends, its timeoutSeconds pass
// or the server closes.
func (s *Server) watchNodes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if secs, err := strconv.Atoi(r.URL.Query().Get("timeoutSeconds")); err == nil && secs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
		defer cancel()
	}
	defer context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.change.Broadcast()
		s.mu.Unlock()
	})()
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	initial := r.URL.Query().Get("sendInitialEvents") == "true"
	s.mu.Lock()
	var batch []nodeEvent
	sent := len(s.events)
	if from == 0 || initial {
		for _, name := range slices.Sorted(maps.Keys(s.nodes)) {
			batch = append(batch, nodeEvent{Type: watch.Added, Object: s.nodes[name].DeepCopy()})
		}
	}
	if initial {
		// A streaming list (client-go's informers): the initial events
		// end with a bookmark of the resourceVersion they are at.
		batch = append(batch, nodeEvent{Type: watch.Bookmark, Object: &corev1.Node{
			TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv),
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
		}})
	} else if from != 0 {
		sent, _ = slices.BinarySearchFunc(s.events, from+1, func(e nodeEvent, rv int) int {
			v, _ := strconv.Atoi(e.Object.ResourceVersion)
			return v - rv
		})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for {
		for _, e := range batch {
			_ = enc.Encode(e)
		}
		http.NewResponseController(w).Flush()
		s.mu.Lock()
		for sent == len(s.events) && !s.closed && ctx.Err() == nil {
			s.change.Wait()
		}
		batch, sent = slices.Clone(s.events[sent:]), len(s.events)
		done := s.closed || ctx.Err() != nil
		s.mu.Unlock()
		if done {
			return
		}
	}
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
	s.nodes[name] = next
	s.bump(next, watch.Modified)
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
