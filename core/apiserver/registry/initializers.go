package registry

import (
	"context"
	"strings"

	"github.com/wasmplane/wasmplane/core/api/initializers"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Initializers decides which initializers a new object must pass, and hears about
// objects that are waiting for one (the seed's InitializerConfiguration).
type Initializers interface {
	// Pending returns the initializer names for a new object of gvr, in order.
	Pending(ctx context.Context, gvr schema.GroupVersionResource) []string
	// Waiting is told that an object is stored with pending initializers.
	Waiting(gvr schema.GroupVersionResource, namespace, name string)
}

// initializedField is a synthetic field: objects with pending initializers are hidden
// from lists and watches by selecting on it, which also makes a watcher see ADDED at the
// moment the last initializer removes itself.
const initializedField = "metadata.initialized"

type includeUninitializedKey struct{}

// WithIncludeUninitialized marks a list or watch that should also return objects whose
// initializers are pending (?includeUninitialized=true).
func WithIncludeUninitialized(ctx context.Context) context.Context {
	return context.WithValue(ctx, includeUninitializedKey{}, true)
}

func includeUninitialized(ctx context.Context) bool {
	v, _ := ctx.Value(includeUninitializedKey{}).(bool)
	return v
}

// PendingInitializers returns an object's pending initializers.
func PendingInitializers(obj runtime.Object) []string {
	var v string
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// Read in place: the accessor's GetAnnotations copies the map.
		v, _, _ = unstructured.NestedString(u.Object, "metadata", "annotations", initializers.PendingAnnotation)
	} else if m, err := meta.Accessor(obj); err == nil {
		v = m.GetAnnotations()[initializers.PendingAnnotation]
	}
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// hideUninitialized narrows a field selector to initialized objects.
func hideUninitialized(sel fields.Selector) fields.Selector {
	req := fields.OneTermEqualSelector(initializedField, "true")
	if sel == nil || sel.Empty() {
		return req
	}
	return fields.AndSelectors(sel, req)
}

// StorageAttrs returns the selector attributes storage should compute once per object
// version for r: the resource's own fields plus the synthetic metadata.initialized.
func StorageAttrs(r *Resource) func(runtime.Object) (labels.Set, fields.Set, error) {
	base := r.GetAttrs
	if base == nil {
		base = func(obj runtime.Object) (labels.Set, fields.Set, error) { return DefaultAttrs(obj, r.Namespaced) }
	}
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		l, f, err := base(obj)
		if err != nil {
			return nil, nil, err
		}
		out := make(fields.Set, len(f)+1)
		for k, v := range f {
			out[k] = v
		}
		out[initializedField] = "true"
		if len(PendingInitializers(obj)) > 0 {
			out[initializedField] = "false"
		}
		return l, out, nil
	}
}

func (s *Store) setPending(ctx context.Context, obj runtime.Object) []string {
	if s.Initializers == nil {
		return nil
	}
	pending := s.Initializers.Pending(ctx, s.Resource.GroupVersion.WithResource(s.Resource.Name))
	if len(pending) == 0 {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	ann := m.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[initializers.PendingAnnotation] = strings.Join(pending, ",")
	m.SetAnnotations(ann)
	return pending
}
