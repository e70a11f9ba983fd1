package unstructuredjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	sigsjson "sigs.k8s.io/json"
)

// serializerBytes is what apimachinery's JSON serializer writes for an unstructured
// object with content obj: the bytes Append (plus a newline) stands in for.
func serializerBytes(t testing.TB, obj map[string]any) []byte {
	t.Helper()
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, runtime.NewScheme(), runtime.NewScheme(), kjson.SerializerOptions{})
	var buf bytes.Buffer
	if err := s.Encode(&unstructured.Unstructured{Object: obj}, &buf); err != nil {
		t.Fatalf("serializer: %v", err)
	}
	return buf.Bytes()
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	strs := []string{
		"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f",
		"\x00\x01\x1f\x7f", "é ü 日本語 🙂", "line\u2028sep\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
		strings.Repeat("long ", 100),
	}
	floats := []float64{0, math.Copysign(0, -1), 1.5, -2.25, 1e-6, 9.99e-7, 1e-7, 1.234e-9, 1e20, 1e21, 1.5e300, -1e-300,
		123456789.123, 0.1, 1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 1e100}
	cases := []any{
		nil, true, false, int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64), int(7), int32(-8),
		map[string]any(nil), []any(nil), map[string]any{}, []any{},
	}
	for _, s := range strs {
		cases = append(cases, s, map[string]any{s: s})
	}
	for _, f := range floats {
		cases = append(cases, f, -f)
	}
	cases = append(cases,
		map[string]any{"b": int64(1), "a": []any{"x", nil, 2.5, map[string]any{"z": true, "Z": false, "é": "<>"}}, "": "empty key", "a\x00": 1.0},
		map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{
			"name": "w", "namespace": "default", "labels": map[string]any{"app": "x"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:size": map[string]any{}}}}},
		}, "spec": map[string]any{"size": int64(3), "ratio": 0.25, "tags": []any{"a", "b"}}},
	)
	for i, c := range cases {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("case %d: encoding/json: %v", i, err)
		}
		got, ok := Append(nil, c)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("case %d (%#v): got %q, %v; encoding/json %q", i, c, got, ok, want)
		}
		if m, isMap := c.(map[string]any); isMap && m != nil {
			if lib := serializerBytes(t, m); !bytes.Equal(append(got, '\n'), lib) {
				t.Errorf("case %d: got %q; the serializer writes %q", i, got, lib)
			}
		}
	}
}

func TestAppendDeclines(t *testing.T) {
	for _, c := range []any{
		math.NaN(), math.Inf(1), math.Inf(-1), float32(1.5), uint64(1), json.Number("1"), []string{"a"},
		map[string]string{"a": "b"}, map[string]any{"a": []any{struct{}{}}}, deep(maxDepth + 1),
	} {
		if got, ok := Append(nil, c); ok {
			t.Errorf("%T: wrote %q, want a refusal", c, got)
		}
	}
	want, _ := json.Marshal(deep(maxDepth - 1))
	if got, ok := Append(nil, deep(maxDepth-1)); !ok || !bytes.Equal(got, want) {
		t.Errorf("content %d deep: %v, differs from encoding/json: %v", maxDepth-1, ok, !bytes.Equal(got, want))
	}
}

func deep(n int) any {
	var v any = "leaf"
	for i := range n {
		if i%2 == 0 {
			v = map[string]any{"k": v}
		} else {
			v = []any{v}
		}
	}
	return v
}

// TestAppendRandomContent compares Append with encoding/json on random unstructured
// content: random keys and strings (bytes from ASCII, control characters, multi-byte
// and invalid UTF-8), numbers of every magnitude.
func TestAppendRandomContent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		v := randomValue(r, 0)
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("value %d: encoding/json: %v", i, err)
		}
		got, ok := Append(nil, v)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("value %d: got %q, %v; encoding/json %q", i, got, ok, want)
		}
	}
}

func randomValue(r *rand.Rand, depth int) any {
	n := r.IntN(9)
	if depth > 4 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.Uint64())
	case 3:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7ff))<<52)
	case 4:
		return randomString(r)
	case 5, 6:
		m := map[string]any{}
		for range r.IntN(6) {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(5))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
}

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1b", "\x7f", "é", "日", "🙂", "\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "\ufffd"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a<b>&c", "\xff\u2028", "\x00\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(map[string]any{s: s})
		if got, ok := Append(nil, map[string]any{s: s}); !ok || !bytes.Equal(got, want) {
			t.Fatalf("%q: got %q; encoding/json %q", s, got, want)
		}
	})
}

// benchObject is a custom object like the CRD bench's: twenty spec fields and
// managedFields.
func benchObject() map[string]any {
	spec := map[string]any{}
	for i := range 20 {
		k := "field" + string(rune('a'+i))
		switch i % 3 {
		case 0:
			spec[k] = "value-" + k
		case 1:
			spec[k] = int64(i * 1000)
		default:
			spec[k] = []any{"x", "y"}
		}
	}
	fields := map[string]any{".": map[string]any{}}
	for k := range spec {
		fields["f:"+k] = map[string]any{}
	}
	return map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Widget", "metadata": map[string]any{
		"name": "widget-12345", "namespace": "default", "uid": "0b8e2ab4-64c1-4a3a-9f0c-4a4f0d6f1c11",
		"generation": int64(1), "creationTimestamp": "2026-12-06T20:00:00Z",
		"managedFields": []any{map[string]any{"manager": "bench", "operation": "Update", "apiVersion": "bench.example.com/v1",
			"time": "2026-12-06T20:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": fields}}},
	}, "spec": spec}
}

func BenchmarkEncode(b *testing.B) {
	obj := benchObject()
	b.Run("unstructuredjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Append(make([]byte, 0, 1024), obj); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("serializer", func(b *testing.B) {
		b.ReportAllocs()
		s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, runtime.NewScheme(), runtime.NewScheme(), kjson.SerializerOptions{})
		u := &unstructured.Unstructured{Object: obj}
		for b.Loop() {
			var buf bytes.Buffer
			if err := s.Encode(u, &buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppendExact checks AppendExact's report against decoding what it wrote with
// sigs.k8s.io/json as the API server reads stored custom objects: content reported exact
// must come back deep-equal, and content of only the exact kinds must be reported so.
// Its bytes are Append's.
func TestAppendExact(t *testing.T) {
	cases := []struct {
		name  string
		v     map[string]any
		exact bool
	}{
		{"plain", map[string]any{"a": "x", "b": int64(-3), "c": true, "d": nil, "e": []any{"y", int64(1)}, "f": map[string]any{}}, true},
		{"empty", map[string]any{}, true},
		{"integral float", map[string]any{"a": float64(2)}, false},
		{"fractional float", map[string]any{"a": 2.5}, false},
		{"int", map[string]any{"a": 2}, false},
		{"int32", map[string]any{"a": int32(2)}, false},
		{"nil map", map[string]any{"a": map[string]any(nil)}, false},
		{"nil slice", map[string]any{"a": []any(nil)}, false},
		{"invalid UTF-8 value", map[string]any{"a": "\xff"}, false},
		{"invalid UTF-8 key", map[string]any{"\xff": "a"}, false},
		{"deep float", map[string]any{"a": []any{map[string]any{"b": 1.0}}}, false},
		{"U+2028 and U+FFFD", map[string]any{"a": "\u2028\ufffd<&>"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok, exact := AppendExact(nil, c.v)
			if !ok || exact != c.exact {
				t.Fatalf("AppendExact: ok %v, exact %v; the case says exact %v", ok, exact, c.exact)
			}
			checkExact(t, c.v, b, exact)
		})
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		v := map[string]any{"spec": randomValue(r, 0)}
		if i%2 == 0 {
			v = exactKinds(v).(map[string]any)
		}
		b, ok, exact := AppendExact(nil, v)
		if !ok {
			t.Fatalf("value %d: declined", i)
		}
		if i%2 == 0 && !exact {
			t.Fatalf("value %d (%#v): content of exact kinds only was not reported exact", i, v)
		}
		checkExact(t, v, b, exact)
	}
}

// checkExact compares what AppendExact wrote for v with Append's bytes, and, when it
// reported v exact, v with the bytes decoded.
func checkExact(t *testing.T, v map[string]any, b []byte, exact bool) {
	t.Helper()
	if want, _ := Append(nil, v); !bytes.Equal(b, want) {
		t.Fatalf("AppendExact wrote %q, Append %q", b, want)
	}
	if !exact {
		return
	}
	var got map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &got); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("reported exact, but %q decodes to %#v, not %#v", b, got, v)
	}
}

// exactKinds turns v into content of the kinds decoding gives back exactly: floats into
// int64s, invalid UTF-8 into U+FFFD, nil maps and slices into empty ones.
func exactKinds(v any) any {
	switch v := v.(type) {
	case float64:
		return int64(v)
	case string:
		return strings.ToValidUTF8(v, "\ufffd")
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[strings.ToValidUTF8(k, "\ufffd")] = exactKinds(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = exactKinds(e)
		}
		return l
	}
	return v
}
