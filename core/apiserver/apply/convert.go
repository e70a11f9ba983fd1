package apply

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// versionedConvertor is the scheme's conversion for the field managers of a built-in
// kind, without the deep copies runtime.Scheme makes when an object already is of the
// version asked for. The field managers convert the live and the new object of every
// write to the kind's version although they already are of it, and only read the
// result (they convert it to a typed value); the one they modify, the merged object of
// an apply, comes from an Unstructured, which is converted into a new object anyway. So
// an object of the version asked for needs no copy of its own: it is returned as it is
// when its apiVersion and kind are already set, or as a shallow copy of its top-level
// struct with them set (never set on the object itself, which may be the stored one,
// read concurrently). Other conversions go to the scheme.
type versionedConvertor struct {
	scheme *runtime.Scheme
}

// Convert implements runtime.ObjectConvertor.
func (c versionedConvertor) Convert(in, out, context any) error {
	return c.scheme.Convert(in, out, context)
}

// ConvertFieldLabel implements runtime.ObjectConvertor.
func (c versionedConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return c.scheme.ConvertFieldLabel(gvk, label, value)
}

// ConvertToVersion implements runtime.ObjectConvertor.
func (c versionedConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	fresh := false
	if u, ok := in.(runtime.Unstructured); ok {
		typed, err := c.fromUnstructured(u)
		if err != nil {
			return nil, err
		}
		in, fresh = typed, true
	}
	kinds, _, err := c.scheme.ObjectKinds(in)
	if err != nil || len(kinds) == 0 {
		return c.scheme.ConvertToVersion(in, target)
	}
	gvk, ok := target.KindForGroupVersionKinds(kinds)
	if !ok || !c.isKindOf(in, gvk) {
		return c.scheme.ConvertToVersion(in, target)
	}
	if in.GetObjectKind().GroupVersionKind() == gvk {
		return in, nil
	}
	out := in
	if !fresh {
		out = shallowCopy(in)
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

// fromUnstructured makes the typed object of an Unstructured, as runtime.Scheme does
// before converting one.
func (c versionedConvertor) fromUnstructured(u runtime.Unstructured) (runtime.Object, error) {
	gvks, _, err := c.scheme.ObjectKinds(u)
	if err != nil {
		return nil, err
	}
	typed, err := c.scheme.New(gvks[0])
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
		return nil, fmt.Errorf("unable to convert unstructured object to %v: %w", gvks[0], err)
	}
	return typed, nil
}

// isKindOf says whether obj's Go type is the one the scheme registers for gvk (an
// object of a type registered under several kinds is converted by the scheme).
func (c versionedConvertor) isKindOf(obj runtime.Object, gvk schema.GroupVersionKind) bool {
	t, ok := c.scheme.AllKnownTypes()[gvk]
	return ok && reflect.TypeOf(obj) == reflect.PointerTo(t)
}

// shallowCopy copies the struct obj points to, sharing everything it references.
func shallowCopy(obj runtime.Object) runtime.Object {
	v := reflect.ValueOf(obj).Elem()
	out := reflect.New(v.Type())
	out.Elem().Set(v)
	return out.Interface().(runtime.Object)
}

// viaUnstructured gives the typed value of a Go object over its unstructured form (the
// map runtime.DefaultUnstructuredConverter makes of it) instead of over the object
// itself. The two are the same value: structured-merge-diff reads a Go object by
// reflection with the JSON rules the unstructured converter follows (field names, inline
// and omitempty fields, the marshalers of times, quantities and int-or-strings), and
// TestViaUnstructuredIsTheLibrarysAnswer checks the field managers' results against the
// library's own over the Go objects. What differs is the cost of reading it: every read
// of a field by reflection allocates, and an apply reads the live object in the merge,
// the comparison, the prune and the no-op check, so converting it once costs less than
// reading it by reflection that many times.
type viaUnstructured struct {
	managedfields.TypeConverter
}

// ObjectToTyped implements managedfields.TypeConverter.
func (c viaUnstructured) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(*unstructured.Unstructured); !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("%v to unstructured: %w", obj.GetObjectKind().GroupVersionKind(), err)
		}
		obj = &unstructured.Unstructured{Object: m}
	}
	return c.TypeConverter.ObjectToTyped(obj, opts...)
}
