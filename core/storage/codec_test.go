package storage

import (
	"bytes"
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
