package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// unstructuredScheme creates and converts the objects of custom resources for the field
// managers. Those kinds are in no scheme: their objects are unstructured, and their
// versions differ by apiVersion alone (conversion strategy None), as in
// apiextensions-apiserver's creator and nop converter.
type unstructuredScheme struct {
	// kind is the resource's; an empty object (the live object of an apply that
	// creates) carries none and is taken to be of it.
	kind schema.GroupVersionKind
}

// New implements runtime.ObjectCreater.
func (unstructuredScheme) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// Convert implements runtime.ObjectConvertor.
func (unstructuredScheme) Convert(in, out, _ any) error {
	from, ok := in.(*unstructured.Unstructured)
	to, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("converting %T to %T: custom resources convert only unstructured objects", in, out)
	}
	to.Object = runtime.DeepCopyJSON(from.Object)
	return nil
}

// ConvertToVersion implements runtime.ObjectConvertor.
func (c unstructuredScheme) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("converting %T: custom resources convert only unstructured objects", in)
	}
	kind := u.GroupVersionKind()
	if kind.Empty() {
		kind = c.kind
	}
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{kind})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", kind, target)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(to)
	return out, nil
}

// ConvertFieldLabel implements runtime.ObjectConvertor; field selectors are not its
// business here.
func (unstructuredScheme) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}
