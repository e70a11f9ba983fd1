package storage

import (
	"bytes"
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Widget is a type without protobuf support, like wasmplane's own API types.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Color             string `json:"color"`
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// WidgetList is the list type of Widget.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]Widget, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Widget)
	}
	return &c
}

func TestCodecJSONForTypesWithoutProtobuf(t *testing.T) {
	gv := schema.GroupVersion{Group: "test.wasmplane.io", Version: "v1"}
	sch := runtime.NewScheme()
	sch.AddKnownTypes(gv, &Widget{}, &WidgetList{})
	codec := NewCodec(sch)
	var buf bytes.Buffer
	if err := codec.Encode(&Widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Color: "red"}, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("{")) || !bytes.Contains(buf.Bytes(), []byte(`"kind":"Widget"`)) {
		t.Fatalf("want JSON with its kind, got %q", buf.String())
	}
	s := NewEtcd(testClient, ResourceConfig{
		GroupResource: gv.WithResource("widgets").GroupResource(),
		Prefix:        podConfig(t).Prefix + "-widgets",
		NewFunc:       func() runtime.Object { return &Widget{} },
		NewListFunc:   func() runtime.Object { return &WidgetList{} },
		Codec:         codec,
	})
	ctx := context.Background()
	key := s.cfg.Prefix + "/w"
	if err := s.Create(ctx, key, &Widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Color: "red"}, nil); err != nil {
		t.Fatal(err)
	}
	list := &WidgetList{}
	if err := s.GetList(ctx, s.cfg.Prefix+"/", ListOptions{Recursive: true}, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Color != "red" || list.Items[0].Kind != "Widget" ||
		list.Items[0].APIVersion != gv.String() || list.Items[0].ResourceVersion == "" {
		t.Fatalf("listed %+v", list.Items)
	}
}

// TestCodecUnstructuredAsTheJSONSerializer checks that custom objects are stored as the
// JSON serializer writes them, whether the quick writer takes the content or leaves it
// to the serializer (a float32 is not content JSON decoding gives).
func TestCodecUnstructuredAsTheJSONSerializer(t *testing.T) {
	sch := runtime.NewScheme()
	codec := NewCodec(sch)
	lib := json.NewSerializerWithOptions(json.DefaultMetaFactory, sch, sch, json.SerializerOptions{})
	for name, content := range map[string]map[string]any{
		"plain": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "labels": map[string]any{"a<b": "x&y"}},
			"spec": map[string]any{"n": int64(3), "f": 2.5, "big": 1e21, "tiny": 1e-7, "s": "é\u2028\xff", "l": []any{nil, true}}},
		"left to the serializer": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
			"spec": map[string]any{"f": float32(1.25), "m": map[string]string{"b": "1", "a": "2"}}},
	} {
		t.Run(name, func(t *testing.T) {
			var got, want bytes.Buffer
			if err := codec.Encode(&unstructured.Unstructured{Object: content}, &got); err != nil {
				t.Fatal(err)
			}
			if err := lib.Encode(&unstructured.Unstructured{Object: content}, &want); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Fatalf("stored %q, the serializer writes %q", got.String(), want.String())
			}
		})
	}
}
