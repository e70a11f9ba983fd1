package endpoints

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmplane/wasmplane/core/api"
)

// TestDecodeUnstructuredJSONAsTheSerializer compares the one-pass decoding of custom
// objects with the strict JSON serializer's: whenever it decodes a body, the serializer
// decodes the same content and kind with no error and no strict-decoding warning.
// Bodies it must decline (malformed, duplicate keys, odd apiVersion or kind, numbers and
// strings the serializer reads its own way) are checked to be declined.
func TestDecodeUnstructuredJSONAsTheSerializer(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	info, ok := c.infoFor(runtime.ContentTypeJSON)
	if !ok || info.StrictSerializer == nil {
		t.Fatal("no strict JSON serializer")
	}
	head := `"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}`
	taken := []string{
		`{` + head + `}`,
		" \n\t{ " + strings.ReplaceAll(head, ",", " ,\r\n ") + ` , "spec" : { } } ` + "\n",
		`{` + head + `,"spec":{"i":1,"neg":-42,"zero":-0,"f":1.5,"one":1.0,"e":1e2,"E":-2.5E-3,"big":9223372036854775807,"bigger":9223372036854775808,"tiny":5e-324}}`,
		`{` + head + `,"spec":{"s":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u65e5\u0000","u":"é日🙂","l":[],"n":null,"t":true,"x":false,"nest":[[{"a":[1,{"b":{}}]}]]}}`,
		`{` + head + `,"spec":{"\u0061":"escaped key","a\u0062":1}}`,
		`{"kind":"Widget","apiVersion":"v1"}`,
		`{"kind":"Widget","apiVersion":"example.com/v1","KIND2":1,"items":[1]}`,
	}
	declined := []string{
		``, `[]`, `null`, `{`, `{}`, `{"kind":"Widget"}`, `{"apiVersion":"v1"}`, `{"apiVersion":"v1","kind":""}`,
		`{"apiVersion":"v1","kind":5}`, `{"apiVersion":5,"kind":"W"}`, `{"apiVersion":null,"kind":"W"}`,
		`{"apiVersion":"a/b/c","kind":"W"}`, `{"apiVersion":"v1","kind":"W","Kind":"X"}`, `{"apiversion":"v1","apiVersion":"v1","kind":"W"}`,
		`{"apiVersion":"v1","\u212aind":"W","kind":"W"}`, `{"apiVersion":"v1","kind":"W","a":1,"a":2}`, `{"apiVersion":"v1","kind":"W","s":{"a":1,"\u0061":2}}`,
		`{"apiVersion":"v1","kind":"W"} x`, `{"apiVersion":"v1","kind":"W",}`, `{"apiVersion":"v1","kind":"W","l":[1,]}`,
		`{"apiVersion":"v1","kind":"W","n":01}`, `{"apiVersion":"v1","kind":"W","n":1.}`, `{"apiVersion":"v1","kind":"W","n":.5}`,
		`{"apiVersion":"v1","kind":"W","n":1e}`, `{"apiVersion":"v1","kind":"W","n":+1}`, `{"apiVersion":"v1","kind":"W","n":1e400}`,
		`{"apiVersion":"v1","kind":"W","n":NaN}`, `{"apiVersion":"v1","kind":"W","s":"\ud83d\ude42"}`, `{"apiVersion":"v1","kind":"W","s":"\ud800"}`,
		"{\"apiVersion\":\"v1\",\"kind\":\"W\",\"s\":\"\xff\"}", "{\"apiVersion\":\"v1\",\"kind\":\"W\",\"s\":\"a\tb\"}", `{"apiVersion":"v1","kind":"W","s":"\x"}`,
		`{"apiVersion":"v1","kind":"W","s":"\u12"}`, `{"apiVersion":"v1","kind":"W","t":tru}`, `{"apiVersion":"v1","kind":"W","a":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
		`{"apiVersion":"v1","kind":"W" "a":1}`, `{"apiVersion":"v1","kind":"W","a" 1}`, `{'apiVersion':"v1"}`,
	}
	check := func(t *testing.T, body string) (bool, error) {
		t.Helper()
		obj, gvk, ok := decodeUnstructuredJSON(info, info.StrictSerializer, []byte(body), &unstructured.Unstructured{})
		libObj, libGVK, err := info.StrictSerializer.Decode([]byte(body), &schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, &unstructured.Unstructured{})
		if !ok {
			return false, err
		}
		if err != nil {
			t.Fatalf("decoded %q; the serializer fails: %v", body, err)
		}
		if !reflect.DeepEqual(obj.(*unstructured.Unstructured).Object, libObj.(*unstructured.Unstructured).Object) || *gvk != *libGVK {
			t.Fatalf("decoded %q as %#v (%v); the serializer %#v (%v)", body, obj, gvk, libObj, libGVK)
		}
		return true, nil
	}
	for i, body := range taken {
		if ok, err := check(t, body); !ok {
			t.Errorf("taken case %d %q declined (the serializer: %v)", i, body, err)
		}
	}
	for i, body := range declined {
		if ok, _ := check(t, body); ok {
			t.Errorf("declined case %d %q was decoded", i, body)
		}
	}
	// The non-strict serializer (fieldValidation=Ignore) and other encodings are left alone.
	if _, _, ok := decodeUnstructuredJSON(info, info.Serializer, []byte(taken[0]), &unstructured.Unstructured{}); ok {
		t.Error("the non-strict serializer's decoding was taken over")
	}
}

// BenchmarkDecodeCustomObject times decoding a custom object of twenty spec fields as a
// create request's body, in one pass and by the strict JSON serializer.
func BenchmarkDecodeCustomObject(b *testing.B) {
	c := NewCodecs(api.MustScheme())
	info, _ := c.infoFor(runtime.ContentTypeJSON)
	spec := map[string]any{}
	for i := range 20 {
		if i%2 == 0 {
			spec[fmt.Sprintf("s%02d", i)] = fmt.Sprintf("value-%d", i)
		} else {
			spec[fmt.Sprintf("n%02d", i)] = int64(i * 1000)
		}
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "widget-1", "namespace": "default", "labels": map[string]any{"app": "bench"}}, "spec": spec})
	want := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := decodeUnstructuredJSON(info, info.StrictSerializer, body, &unstructured.Unstructured{}); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("serializer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := info.StrictSerializer.Decode(body, &want, &unstructured.Unstructured{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
