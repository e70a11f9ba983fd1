package endpoints

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmplane/wasmplane/core/storage/unstructuredjson"
)

// decodeUnstructuredJSON decodes a JSON body into a custom object as the strict JSON
// serializer does, reading it once instead of three times (the serializer checks the
// document, parses it for apiVersion and kind, then parses it into maps), and reports
// false when the serializer must decode it: any other encoding or target, and every body
// the serializer would refuse, warn about or read differently — one unstructuredjson
// declines, one whose apiVersion or kind is not a plain string under its exact key
// (the serializer finds them case-insensitively), an apiVersion that does not parse, an
// empty kind.
func decodeUnstructuredJSON(info runtime.SerializerInfo, dec runtime.Decoder, body []byte, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, bool) {
	u, ok := into.(*unstructured.Unstructured)
	if !ok || info.MediaType != runtime.ContentTypeJSON || info.StrictSerializer == nil || dec != info.StrictSerializer {
		return nil, nil, false
	}
	m, ok := unstructuredjson.Decode(body)
	if !ok {
		return nil, nil, false
	}
	for k := range m {
		if (k != "apiVersion" && strings.EqualFold(k, "apiVersion")) || (k != "kind" && strings.EqualFold(k, "kind")) {
			return nil, nil, false
		}
	}
	apiVersion, ok := m["apiVersion"].(string)
	if !ok {
		return nil, nil, false
	}
	kind, ok := m["kind"].(string)
	if !ok || kind == "" {
		return nil, nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, false
	}
	u.SetUnstructuredContent(m)
	gvk := gv.WithKind(kind)
	return u, &gvk, true
}
