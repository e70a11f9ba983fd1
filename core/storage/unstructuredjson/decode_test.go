package unstructuredjson

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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
		// Invalid UTF-8 in two keys of one object becomes the same key: declined.
		decodesAsStrict(t, i, b)
	}
}

// decodesAsStrict checks that Decode reads doc (document i) as UnmarshalStrict does, or,
// for a document with a strict-decoding error, declines it; it reports which.
func decodesAsStrict(t *testing.T, i int, doc []byte) (declined bool) {
	t.Helper()
	want := map[string]any{}
	strict, err := kjson.UnmarshalStrict(doc, &want)
	if err != nil {
		t.Fatalf("document %d: UnmarshalStrict: %v", i, err)
	}
	got, ok := Decode(doc)
	if len(strict) > 0 {
		if ok {
			t.Fatalf("document %d decoded despite %v", i, strict)
		}
		return true
	}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("document %d (%v): decoded %#v; UnmarshalStrict %#v", i, ok, got, want)
	}
	return false
}

// TestDecodeWideAndDeep decodes objects of up to sixty members, some repeating a key,
// nested up to forty deep: more members than are read on the stack, and objects deeper
// than stackDepth, read as UnmarshalStrict reads them, and every repeated key declined.
func TestDecodeWideAndDeep(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	deepest := 0
	var object func(b *strings.Builder, depth int)
	object = func(b *strings.Builder, depth int) {
		deepest = max(deepest, depth)
		b.WriteByte('{')
		n := r.IntN(61)
		if depth > 2 {
			n = 1 + r.IntN(3)
		}
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			key := i
			if r.IntN(200) == 0 {
				key = r.IntN(i + 1) // now and then a key again
			}
			fmt.Fprintf(b, `"k%d":`, key)
			switch {
			case i == 0 && depth < 40 && r.IntN(10) > 0:
				object(b, depth+1)
			case r.IntN(3) == 0:
				fmt.Fprintf(b, "%d", r.IntN(1000))
			default:
				fmt.Fprintf(b, `"v%d"`, i)
			}
		}
		b.WriteByte('}')
	}
	declined, deep := 0, 0
	for i := range 500 {
		deepest = 0
		var b strings.Builder
		object(&b, 0)
		doc := []byte(b.String())
		if deepest > stackDepth {
			deep++
		}
		if decodesAsStrict(t, i, doc) {
			declined++
		}
	}
	if declined == 0 || declined > 250 || deep < 50 {
		t.Fatalf("of 500 documents %d repeated a key, %d nested deeper than %d: the sample tells too little", declined, deep, stackDepth)
	}
}
