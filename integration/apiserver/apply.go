package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the field manager of the harness's server-side applies.
const FieldManager = "hcloudscale-integration"

// ApplyOption changes how [Server.Apply] applies.
type ApplyOption func(*applyConfig)

type applyConfig struct {
	dryRun    bool
	namespace string
}

// DryRun makes the API server check and admit every object without
// storing it (server-side dry run, dryRun=All): validation, defaulting,
// admission and RBAC all run. Nothing is created, namespaces neither: an
// object in a namespace that does not exist yet fails.
func DryRun() ApplyOption { return func(c *applyConfig) { c.dryRun = true } }

// InNamespace puts the namespaced objects that name no namespace in
// namespace; without it they go to "default".
func InNamespace(namespace string) ApplyOption {
	return func(c *applyConfig) { c.namespace = namespace }
}

// Apply applies every object of a multi-document YAML (or JSON) as admin,
// with server-side apply, and fails t with every object that could not be
// applied.
func (s *Server) Apply(t testing.TB, yaml []byte, opts ...ApplyOption) {
	t.Helper()
	if err := s.TryApply(t.Context(), yaml, opts...); err != nil {
		t.Fatal(err)
	}
}

// TryApply is [Server.Apply] for a test that expects it to fail: it
// applies every object it can and returns one error per object that
// failed, each naming the object as kind namespace/name.
func (s *Server) TryApply(ctx context.Context, yaml []byte, opts ...ApplyOption) error {
	cfg := applyConfig{namespace: "default"}
	for _, o := range opts {
		o(&cfg)
	}
	objs, err := decodeObjects(yaml)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.AdminConfig())
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(s.AdminConfig())
	if err != nil {
		return err
	}
	// Namespaces first, so that the objects in them find them.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolRank(a.GetKind() != "Namespace") - boolRank(b.GetKind() != "Namespace")
	})
	var errs []error
	for _, obj := range objs {
		if err := applyOne(ctx, dyn, mapper, obj, cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", describe(obj), err))
		}
	}
	return errors.Join(errs...)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured, cfg applyConfig) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A kind defined by an object applied just before.
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(cfg.namespace)
		}
		ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	ao := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if cfg.dryRun {
		ao.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, ao)
	return err
}

// describe names an object as kind namespace/name, or kind name.
func describe(obj *unstructured.Unstructured) string {
	kind := obj.GetKind()
	if kind == "" {
		kind = "(no kind)"
	}
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}

// decodeObjects splits a multi-document YAML into objects, skipping empty
// documents; a List's items are objects of their own.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d (%s): needs apiVersion, kind and metadata.name", doc, describe(u))
		}
		out = append(out, u)
	}
}
