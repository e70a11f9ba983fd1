package apply

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// renamingWebhook stands in for a conversion webhook: it sets the target version.
type renamingWebhook struct{ runtime.ObjectConvertor }

func (renamingWebhook) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	to, _ := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	in.GetObjectKind().SetGroupVersionKind(to)
	return in, nil
}

// TestCustomConvertToVersion: customConvertor's answers are, in content and type, the
// same as those of its conversion made into what NewEmptyInstance gives.
func TestCustomConvertToVersion(t *testing.T) {
	v1 := schema.GroupVersion{Group: "example.com", Version: "v1"}
	v2 := schema.GroupVersion{Group: "example.com", Version: "v2"}
	widget := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)}}}
	}
	cases := []struct {
		name    string
		in      func() *unstructured.Unstructured
		target  schema.GroupVersion
		webhook runtime.ObjectConvertor
	}{
		{"the live object of a create", func() *unstructured.Unstructured { return &unstructured.Unstructured{Object: map[string]any{}} }, v1, nil},
		{"the same version", widget, v1, nil},
		{"another version, no webhook", widget, v2, nil},
		{"another version through a webhook", widget, v2, renamingWebhook{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := customConvertor{webhook: tc.webhook}.ConvertToVersion(tc.in(), tc.target)
			if err != nil {
				t.Fatal(err)
			}
			want, err := newEmptyInstanceConversion(tc.webhook, tc.in(), tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(want) || !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
}

// newEmptyInstanceConversion is customConvertor.ConvertToVersion with its answer made
// from in.NewEmptyInstance(), as it was made before.
func newEmptyInstanceConversion(webhook runtime.ObjectConvertor, in *unstructured.Unstructured, target runtime.GroupVersioner) (runtime.Object, error) {
	out := in.NewEmptyInstance()
	gvk := in.GroupVersionKind()
	if gvk.Empty() {
		out.SetUnstructuredContent(runtime.DeepCopyJSON(in.UnstructuredContent()))
		return out, nil
	}
	to, _ := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if webhook != nil && to != gvk {
		out.SetUnstructuredContent(runtime.DeepCopyJSON(in.UnstructuredContent()))
		return webhook.ConvertToVersion(out, target)
	}
	top := map[string]any{}
	for k, v := range in.UnstructuredContent() {
		top[k] = v
	}
	out.SetUnstructuredContent(top)
	out.GetObjectKind().SetGroupVersionKind(to)
	return out, nil
}
