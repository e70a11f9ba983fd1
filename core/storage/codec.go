package storage

import (
	"bytes"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
)

// protobufPrefix starts every protobuf-encoded object (Kubernetes' envelope magic).
var protobufPrefix = []byte("k8s\x00")

// codec writes protobuf for types that support it (as Kubernetes stores them) and JSON for
// the others, and reads either. It is stateless apart from its serializers.
type codec struct {
	scheme *runtime.Scheme
	proto  *protobuf.Serializer
	json   *json.Serializer
}

// NewCodec returns the codec objects of scheme are stored with: protobuf where the type
// supports it, JSON otherwise; decoding recognizes either and sets apiVersion/kind.
func NewCodec(scheme *runtime.Scheme) runtime.Codec {
	return &codec{
		scheme: scheme,
		proto:  protobuf.NewSerializer(scheme, scheme),
		json:   json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
	}
}

// Identifier implements runtime.Encoder.
func (c *codec) Identifier() runtime.Identifier { return "wasmplane-storage" }

// Encode implements runtime.Encoder. The object's kind is set for the duration of the
// encode only, because the serializers write what GetObjectKind says.
func (c *codec) Encode(obj runtime.Object, w io.Writer) error {
	_, err := c.encode(obj, w)
	return err
}

// encode is Encode, and also reports whether obj is a custom object whose content is
// exactly what decoding the bytes written gives back (see unstructuredjson.AppendExact).
func (c *codec) encode(obj runtime.Object, w io.Writer) (exact bool, err error) {
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return false, fmt.Errorf("storage codec: %w", err)
	}
	kind := obj.GetObjectKind()
	old := kind.GroupVersionKind()
	defer kind.SetGroupVersionKind(old)
	kind.SetGroupVersionKind(gvks[0])

	if u, ok := obj.(*unstructured.Unstructured); ok {
		// A custom object: JSON, written without encoding/json's reflection when its
		// content allows (the same bytes the JSON serializer writes).
		if b, ok, exact := unstructuredjson.AppendExact(make([]byte, 0, 1024), u.Object); ok {
			_, err := w.Write(append(b, '\n'))
			return exact && err == nil, err
		}
		return false, c.json.Encode(obj, w)
	}
	var buf bytes.Buffer
	if err := c.proto.Encode(obj, &buf); err == nil {
		_, err = w.Write(buf.Bytes())
		return false, err
	} else if !protobuf.IsNotMarshalable(err) {
		return false, fmt.Errorf("storage codec: protobuf: %w", err)
	}
	return false, c.json.Encode(obj, w)
}

// Decode implements runtime.Decoder.
func (c *codec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	var (
		obj runtime.Object
		gvk *schema.GroupVersionKind
		err error
	)
	if bytes.HasPrefix(data, protobufPrefix) {
		obj, gvk, err = c.proto.Decode(data, defaults, into)
	} else {
		obj, gvk, err = c.json.Decode(data, defaults, into)
	}
	if err != nil {
		return nil, nil, err
	}
	if gvk != nil && !gvk.Empty() {
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
	}
	return obj, gvk, nil
}
