package apply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// managerConverter is the type converter of the field managers Managers builds: the
// resource's converter, given each object without its managedFields and, with
// viaUnstructured, as its unstructured form rather than the Go object.
//
// Without managedFields: the typed value of a live object carries its managedFields,
// every entry's FieldsV1 parsed from JSON, often as large as the rest of the object, and
// every walk of the value (validation, comparison, merge, prune) reads it, while the
// field manager's answer does not depend on it as long as managedFieldsUnread holds for
// the objects of the write (FieldManager checks that and otherwise uses the library as
// it is). In an apply the live and the merged object carry the same managedFields, which
// no manager's set names, so no comparison, prune or no-op check sees them, and the
// merged object's are replaced by the new encoding. In an update the new object has none
// (the library removes them before comparing), so the comparison reports the one path
// metadata.managedFields as removed (the list is atomic), which changes only the set of
// a manager that names it. The FieldsV1 schema accepts any JSON object, so the typed
// value validates with or without them.
//
// Unstructured: structured-merge-diff reads a Go object by reflection with the JSON rules
// the unstructured converter follows (field names, inline and omitempty fields, the
// marshalers of times, quantities and int-or-strings), so both give the same value; but
// every read of a field by reflection allocates, and an apply reads the live object in
// the merge, the comparison, the prune and the no-op check, so converting it once costs
// less. An update reads each object once or twice, where converting costs more.
//
// TestFieldManagersAreTheLibrarys checks the answers against the library's own over the
// objects as they are.
type managerConverter struct {
	managedfields.TypeConverter
	viaUnstructured bool
}

// ObjectToTyped implements managedfields.TypeConverter.
func (c managerConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	switch u, ok := obj.(*unstructured.Unstructured); {
	case ok:
		obj = unstructuredWithoutManagedFields(u)
	case c.viaUnstructured:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("%v to unstructured: %w", obj.GetObjectKind().GroupVersionKind(), err)
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		obj = &unstructured.Unstructured{Object: m}
	default:
		obj = typedWithoutManagedFields(obj)
	}
	return c.TypeConverter.ObjectToTyped(obj, opts...)
}

// unstructuredWithoutManagedFields is u without metadata.managedFields, sharing the rest.
func unstructuredWithoutManagedFields(u *unstructured.Unstructured) *unstructured.Unstructured {
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return u
	}
	if _, ok := md["managedFields"]; !ok {
		return u
	}
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		out[k] = v
	}
	meta := make(map[string]any, len(md))
	for k, v := range md {
		if k != "managedFields" {
			meta[k] = v
		}
	}
	out["metadata"] = meta
	return &unstructured.Unstructured{Object: out}
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// typedWithoutManagedFields is obj without metadata.managedFields: a copy of its top
// struct whose embedded ObjectMeta (a value, so the copy's own) has none, sharing the
// rest. An object of another shape is returned as it is.
func typedWithoutManagedFields(obj runtime.Object) runtime.Object {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return obj
	}
	f, ok := v.Elem().Type().FieldByName("ObjectMeta")
	if !ok || f.Type != objectMetaType || len(f.Index) != 1 {
		return obj
	}
	if m, ok := obj.(metav1.Object); !ok || len(m.GetManagedFields()) == 0 {
		return obj
	}
	out := shallowCopy(obj)
	reflect.ValueOf(out).Elem().Field(f.Index[0]).Addr().Interface().(*metav1.ObjectMeta).ManagedFields = nil
	return out
}

// managedFieldsUnread says whether a field manager's answer for a write of obj is the same
// when the typed values leave managedFields out (see managerConverter): every entry's
// fields are a JSON object, which the FieldsV1 schema accepts, and none can name the path
// metadata.managedFields. A set the library wrote escapes the quotes around the values in
// its keys as \" and seldom anything else; with only \" and \\ (which spell no letter)
// the key "f:managedFields" can only be written as itself. Any other escape sends the write
// to the library as it is.
func managedFieldsUnread(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	for _, e := range m.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		raw := e.FieldsV1.Raw
		if len(raw) == 0 || raw[0] != '{' || !onlyQuoteEscapes(raw) || bytes.Contains(raw, []byte(`"f:managedFields"`)) || !json.Valid(raw) {
			return false
		}
	}
	return true
}

// onlyQuoteEscapes says whether every escape in the JSON text raw is \" or \\.
func onlyQuoteEscapes(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 == len(raw) || (raw[i+1] != '"' && raw[i+1] != '\\') {
			return false
		}
		i++
	}
	return true
}
