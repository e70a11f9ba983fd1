package endpoints

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestEncodeCachedList checks that a list written from shared cached objects is byte for
// byte what the protobuf encoder writes for the same list, whether or not the items already
// carry a watch encoding.
func TestEncodeCachedList(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	s := &Scope{Codecs: c, Store: &registry.Store{Resource: &registry.Resource{GroupVersion: corev1.SchemeGroupVersion,
		Name: "pods", Kind: "Pod", ListKind: "PodList", Namespaced: true,
		NewFunc: func() runtime.Object { return &corev1.Pod{} }, NewListFunc: func() runtime.Object { return &corev1.PodList{} }}}}
	info, ok := c.infoFor(runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	enc := c.Factory.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	remaining := int64(7)
	var items []*storage.CachingObject
	var pods []corev1.Pod
	for i := range 5 {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "ns", ResourceVersion: fmt.Sprint(10 + i),
			Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i:1"}}, NodeName: "n"}}
		if i == 3 {
			// Larger than the room the encoder guesses per item.
			p.Annotations = map[string]string{"big": strings.Repeat("x", 5000)}
		}
		co := storage.NewCachingObject(p.DeepCopy())
		if i%2 == 0 {
			// As a watch response leaves it.
			if err := enc.Encode(co, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		items = append(items, co)
		pods = append(pods, p)
	}
	for _, n := range []int{0, 1, 5} {
		want := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "tok", RemainingItemCount: &remaining},
			Items: pods[:n]}
		var wb bytes.Buffer
		if err := enc.Encode(want.DeepCopy(), &wb); err != nil {
			t.Fatal(err)
		}
		got, err := s.encodeCachedList(&corev1.PodList{ListMeta: *want.ListMeta.DeepCopy()}, items[:n], info)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wb.Bytes()) {
			t.Fatalf("%d items: cached list encoding differs from the encoder's:\n%x\n%x", n, got, wb.Bytes())
		}
		back := &corev1.PodList{}
		if _, _, err := c.Factory.UniversalDeserializer().Decode(got, nil, back); err != nil {
			t.Fatal(err)
		}
		back.TypeMeta = metav1.TypeMeta{}
		if !equality.Semantic.DeepEqual(back, want) {
			t.Fatalf("%d items: decoded %+v, want %+v", n, back, want)
		}
	}
}

func TestSupportsProtobuf(t *testing.T) {
	for _, tt := range []struct {
		obj  runtime.Object
		want bool
	}{
		{&corev1.Pod{}, true},
		{&corev1.PodList{}, true},
		{storage.NewCachingObject(&corev1.Pod{}), true},
		{&metav1.Status{}, true},
		{&runtime.Unknown{}, true},
		{&metav1.PartialObjectMetadataList{}, true},
		{&metav1.WatchEvent{}, true},
		{&v1alpha1.WasmPlugin{}, false},
		{storage.NewCachingObject(&v1alpha1.WasmPlugin{}), false},
	} {
		if got := SupportsProtobuf(tt.obj); got != tt.want {
			t.Errorf("%T: %v, want %v", tt.obj, got, tt.want)
		}
	}
}

// TestEncodeCachedTypedJSONList checks that a typed list written in JSON from shared cached
// objects is byte for byte what the JSON encoder writes for the same list, for lists of
// no, one and several items, with list metadata, and when an item's JSON is already kept.
func TestEncodeCachedTypedJSONList(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	s := &Scope{Codecs: c, Store: &registry.Store{Resource: &registry.Resource{GroupVersion: corev1.SchemeGroupVersion,
		Name: "configmaps", Kind: "ConfigMap", ListKind: "ConfigMapList", Namespaced: true,
		NewFunc: func() runtime.Object { return &corev1.ConfigMap{} }, NewListFunc: func() runtime.Object { return &corev1.ConfigMapList{} }}}}
	info := c.JSON()
	enc := c.Factory.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	remaining := int64(3)
	var items []*storage.CachingObject
	var cms []corev1.ConfigMap
	for i := range 4 {
		cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm", i), Namespace: "ns", ResourceVersion: fmt.Sprint(10 + i),
			Labels: map[string]string{"app": "<x>&"}, CreationTimestamp: metav1.Unix(1700000000, 0)},
			Data: map[string]string{"k": strings.Repeat("v", i*100), "html": "<b>"}}
		co := storage.NewCachingObject(cm.DeepCopy())
		if i == 1 {
			if _, err := co.ListItemJSON(); err != nil { // kept from an earlier LIST
				t.Fatal(err)
			}
		}
		items = append(items, co)
		cms = append(cms, cm)
	}
	cases := []struct {
		name string
		n    int
		meta metav1.ListMeta
	}{
		{"empty", 0, metav1.ListMeta{ResourceVersion: "42"}},
		{"one", 1, metav1.ListMeta{ResourceVersion: "42"}},
		{"several, a page", 4, metav1.ListMeta{ResourceVersion: "42", Continue: "tok", RemainingItemCount: &remaining}},
	}
	for _, tc := range cases {
		want := &corev1.ConfigMapList{ListMeta: tc.meta, Items: cms[:tc.n]}
		if tc.n == 0 {
			want.Items = []corev1.ConfigMap{}
		}
		var wb bytes.Buffer
		if err := enc.Encode(want.DeepCopy(), &wb); err != nil {
			t.Fatal(err)
		}
		got, err := s.encodeCachedTypedJSONList(&corev1.ConfigMapList{ListMeta: *tc.meta.DeepCopy()}, items[:tc.n], info)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(got, wb.Bytes()) {
			t.Fatalf("%s: cached list encoding differs from the encoder's:\n%s\n%s", tc.name, got, wb.Bytes())
		}
	}
}
