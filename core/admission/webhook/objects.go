package webhook

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objectInterfaces give the webhook plugins wasmplane's scheme. wasmplane keeps objects
// in their served (external) version, so "conversion" between a request's object and
// what a webhook receives is mostly a copy; custom resources are unstructured.
type objectInterfaces struct {
	scheme      *runtime.Scheme
	equivalents runtime.EquivalentResourceMapper
	defaulter   func(obj runtime.Object)
}

func (o objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return creater{o.scheme} }
func (o objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return o.scheme }
func (o objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return defaulter{o.defaulter} }
func (o objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{o.scheme} }
func (o objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.equivalents
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
