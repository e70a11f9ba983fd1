package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// customConvertor converts custom objects between the versions of their CRD for the
// field managers: through the CRD's conversion webhook when it has one, so that a
// manager's fields recorded in another version are compared in that version's shape (as
// kube-apiserver does); otherwise as a CRD without one does (conversion strategy None):
// only apiVersion changes.
//
// Without a webhook call the answer shares everything below its top level with the
// object given (its own top-level map carries the new apiVersion), as versionedConvertor
// does for built-in kinds and for the same reason: the field managers convert the live
// and the new object of every write only to read them (into typed values); the object
// they modify after converting it, the merged object of an apply (defaulted, then given
// its managedFields), is one they have just made from a typed value and nothing else
// holds. A deep copy of the new object was a tenth of a custom create's managedFields
// work.
type customConvertor struct {
	webhook runtime.ObjectConvertor
}

// Convert implements runtime.ObjectConvertor.
func (customConvertor) Convert(in, out, _ any) error {
	src, ok := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("custom objects convert only between Unstructured, not %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

// ConvertToVersion implements runtime.ObjectConvertor.
func (c customConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("a custom object must be Unstructured, not %T", in)
	}
	// Every branch below replaces the content NewEmptyInstance gives (a map holding
	// apiVersion and kind): of an Unstructured's, only the type is needed.
	var out runtime.Unstructured = &unstructured.Unstructured{}
	if _, plain := in.(*unstructured.Unstructured); !plain {
		out = u.NewEmptyInstance()
	}
	gvk := in.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		// The live object of a create: nothing yet, in no version.
		out.SetUnstructuredContent(runtime.DeepCopyJSON(u.UnstructuredContent()))
		return out, nil
	}
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v", gvk, target)
	}
	if c.webhook != nil && to != gvk {
		out.SetUnstructuredContent(runtime.DeepCopyJSON(u.UnstructuredContent()))
		return c.webhook.ConvertToVersion(out, target)
	}
	content := u.UnstructuredContent()
	top := make(map[string]any, len(content))
	for k, v := range content {
		top[k] = v
	}
	out.SetUnstructuredContent(top)
	out.GetObjectKind().SetGroupVersionKind(to)
	return out, nil
}

// ConvertFieldLabel implements runtime.ObjectConvertor; the field managers never call it.
func (customConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// customCreater makes empty custom objects of a kind.
type customCreater struct{}

// New implements runtime.ObjectCreater.
func (customCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}
