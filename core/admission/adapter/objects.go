package adapter

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectInterfaces give k8s.io/apiserver's plugins wasmplane's scheme. wasmplane keeps
// objects in their served (external) version, so "conversion" between a request's object
// and what a plugin sees is mostly a copy; custom resources are unstructured.
type ObjectInterfaces struct {
	// Scheme creates, types and converts objects.
	Scheme *runtime.Scheme
	// Equivalents says which served resources are the same objects in another version.
	Equivalents runtime.EquivalentResourceMapper
	// Defaulter, when set, applies a resource's defaults to an object a plugin changed.
	Defaulter func(obj runtime.Object)
}

// GetObjectCreater implements admission.ObjectInterfaces.
func (o ObjectInterfaces) GetObjectCreater() runtime.ObjectCreater { return creater{o.Scheme} }

// GetObjectTyper implements admission.ObjectInterfaces.
func (o ObjectInterfaces) GetObjectTyper() runtime.ObjectTyper { return o.Scheme }

// GetObjectDefaulter implements admission.ObjectInterfaces.
func (o ObjectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return defaulter{o.Defaulter} }

// GetObjectConvertor implements admission.ObjectInterfaces.
func (o ObjectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{o.Scheme} }

// GetEquivalentResourceMapper implements admission.ObjectInterfaces.
func (o ObjectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.Equivalents
}

// creater makes typed objects the scheme knows and unstructured ones for the rest
// (custom resources).
type creater struct{ scheme *runtime.Scheme }

func (c creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if c.scheme.Recognizes(gvk) {
		return c.scheme.New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

type defaulter struct{ apply func(obj runtime.Object) }

func (d defaulter) Default(obj runtime.Object) {
	if d.apply != nil {
		d.apply(obj)
	}
}

// convertor copies between objects of one type (the served version to itself), and
// between versions of a custom resource (its None conversion: the fields as they are);
// anything else is the scheme's.
type convertor struct{ scheme *runtime.Scheme }

func (c convertor) Convert(in, out, context any) error {
	if uin, ok := in.(*unstructured.Unstructured); ok {
		uout, ok := out.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("converting an unstructured object to %T", out)
		}
		gvk := uout.GroupVersionKind()
		uout.Object = runtime.DeepCopyJSON(uin.Object)
		if !gvk.Empty() {
			uout.SetGroupVersionKind(gvk)
		}
		return nil
	}
	iv, ov := reflect.ValueOf(in), reflect.ValueOf(out)
	if iv.Kind() == reflect.Pointer && iv.Type() == ov.Type() {
		var kind schema.GroupVersionKind
		if o, ok := out.(runtime.Object); ok {
			kind = o.GetObjectKind().GroupVersionKind()
		}
		ov.Elem().Set(iv.Elem())
		if o, ok := out.(runtime.Object); ok {
			o.GetObjectKind().SetGroupVersionKind(kind)
		}
		return nil
	}
	return c.scheme.Convert(in, out, context)
}

func (c convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	return c.scheme.ConvertToVersion(in, gv)
}

func (c convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return c.scheme.ConvertFieldLabel(gvk, label, value)
}
