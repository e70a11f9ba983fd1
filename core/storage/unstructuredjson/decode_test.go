package unstructuredjson

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	kjson "sigs.k8s.io/json"
)

// FuzzDecode checks that whatever Decode reads, sigs.k8s.io/json's UnmarshalStrict reads
// the same, without an error or a strict-decoding complaint.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1.5,-0,1e2,"x\u00e9\n"],"c":{"d":null,"e":true}}`, `{"a":1,"a":2}`,
		`{"n":9223372036854775808}`, `{"n":123456789012345678}`, `{"n":-1234567890123456789}`, `{"s":"\ud800"}`, " {\"k\" : [ ] } "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := Decode(data)
		if !ok {
			return
		}
		want := map[string]any{}
		strict, err := kjson.UnmarshalStrict(data, &want)
		if err != nil || len(strict) > 0 {
			t.Fatalf("decoded %q; UnmarshalStrict: %v %v", data, err, strict)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %q as %#v; UnmarshalStrict %#v", data, got, want)
		}
	})
}

// TestDecodeRandomContent decodes random unstructured content as encoding/json writes
// it, compactly and indented: Decode takes every such document UnmarshalStrict reads
// without complaint, and reads it the same.
func TestDecodeRandomContent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		content := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": randomValue(r, 0)}
		b, err := json.Marshal(content)
		if i%2 == 1 {
			b, err = json.MarshalIndent(content, " ", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		strict, err := kjson.UnmarshalStrict(b, &want)
		if err != nil {
			t.Fatalf("document %d: UnmarshalStrict: %v", i, err)
		}
		got, ok := Decode(b)
		if len(strict) > 0 {
			// Invalid UTF-8 in two keys of one object became the same key.
			if ok {
				t.Fatalf("document %d decoded despite %v", i, strict)
			}
			continue
		}
		if !ok {
			t.Fatalf("document %d declined: %s", i, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("document %d: decoded %#v; UnmarshalStrict %#v", i, got, want)
		}
	}
}
