package jsonview_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

const doc = ` { "kind" : {"group":"","version":"v1","kind":"Pod"},
	"operation":"CREATE",
	"object":{"metadata":{"name":"web","labels":{"team":"a","app.kubernetes.io/name":"x\"y"},"annotations":null},
		"spec":{"containers":[{"name":"c","image":"nginx:1.27"},{"name":"d","image":"busybox"}],"priority":-7,"ratio":1.5e3,"on":true,"off":false}},
	"esc\u0061ped":"caf\u00e9 \ud83d\ude00", "mixed":"é\tx","bad":"a\ufffdb","tricky":"ends with a backslash \\","braces":"{[}]\"",
	"empty":{}, "none":[] } `

func TestGet(t *testing.T) {
	v := jsonview.Parse([]byte(doc))
	tests := []struct {
		name string
		got  jsonview.Value
		raw  string
		kind jsonview.Kind
	}{
		{"member", v.Get("operation"), `"CREATE"`, jsonview.String},
		{"nested", v.At("object", "metadata", "name"), `"web"`, jsonview.String},
		{"object", v.Get("kind"), `{"group":"","version":"v1","kind":"Pod"}`, jsonview.Object},
		{"array", v.At("object", "spec", "containers").Index(1).Get("image"), `"busybox"`, jsonview.String},
		{"number", v.At("object", "spec", "priority"), `-7`, jsonview.Number},
		{"bool", v.At("object", "spec", "off"), `false`, jsonview.Bool},
		{"null", v.At("object", "metadata", "annotations"), `null`, jsonview.Null},
		{"escaped key", v.Get("escaped"), `"caf\u00e9 \ud83d\ude00"`, jsonview.String},
		{"after strings with braces and backslashes", v.Get("empty"), `{}`, jsonview.Object},
		{"last member", v.Get("none"), `[]`, jsonview.Array},
		{"missing member", v.Get("nope"), ``, jsonview.Missing},
		{"member of a non-object", v.Get("operation").Get("x"), ``, jsonview.Missing},
		{"item past the end", v.Get("none").Index(0), ``, jsonview.Missing},
		{"item of a non-array", v.Get("kind").Index(0), ``, jsonview.Missing},
		{"member of missing", v.At("a", "b", "c"), ``, jsonview.Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got.Raw()) != tt.raw || tt.got.Kind() != tt.kind || tt.got.Exists() != (tt.raw != "") {
				t.Fatalf("got %q kind %d, want %q kind %d", tt.got.Raw(), tt.got.Kind(), tt.raw, tt.kind)
			}
		})
	}
}

func TestScalars(t *testing.T) {
	v := jsonview.Parse([]byte(doc))
	labels := v.At("object", "metadata", "labels")
	if !labels.Has("team") || labels.Has("tea") || labels.Has("owner") || v.Get("operation").Has("team") {
		t.Error("Has")
	}
	strs := []struct {
		v    jsonview.Value
		want string
	}{
		{v.Get("operation"), "CREATE"},
		{labels.Get("app.kubernetes.io/name"), `x"y`},
		{v.Get("escaped"), "café 😀"},
		{v.Get("bad"), "a\ufffdb"},
		{v.Get("mixed"), "é\tx"},
		{v.Get("tricky"), `ends with a backslash \`},
		{v.Get("braces"), `{[}]"`},
		{v.Get("kind"), ""},
		{v.Get("nope"), ""},
	}
	for _, s := range strs {
		if got := s.v.String(); got != s.want {
			t.Errorf("String(%s) = %q, want %q", s.v.Raw(), got, s.want)
		}
		if string(s.v.Bytes()) != s.want {
			t.Errorf("Bytes(%s) = %q, want %q", s.v.Raw(), s.v.Bytes(), s.want)
		}
		if s.v.Kind() == jsonview.String && (!s.v.Is(s.want) || s.v.Is(s.want+"x")) {
			t.Errorf("Is(%s, %q) wrong", s.v.Raw(), s.want)
		}
	}
	if n, ok := v.At("object", "spec", "priority").Int(); !ok || n != -7 {
		t.Errorf("Int = %d, %v", n, ok)
	}
	if _, ok := v.At("object", "spec", "ratio").Int(); ok {
		t.Error("Int of 1.5e3 should fail, as encoding/json fails to decode it into an int64")
	}
	if f, ok := v.At("object", "spec", "ratio").Float(); !ok || f != 1500 {
		t.Errorf("Float = %v, %v", f, ok)
	}
	if b, ok := v.At("object", "spec", "on").Bool(); !ok || !b {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	if _, ok := v.Get("operation").Bool(); ok {
		t.Error("Bool of a string")
	}
	var kind struct{ Kind string }
	if err := v.Get("kind").Decode(&kind); err != nil || kind.Kind != "Pod" {
		t.Errorf("Decode = %+v, %v", kind, err)
	}
}

func TestItemsAndMembers(t *testing.T) {
	v := jsonview.Parse([]byte(doc))
	var images []string
	for c := range v.At("object", "spec", "containers").Items() {
		images = append(images, c.Get("image").String())
	}
	if !slices.Equal(images, []string{"nginx:1.27", "busybox"}) {
		t.Errorf("images %q", images)
	}
	var keys []string
	for k, val := range v.Get("kind").Members() {
		keys = append(keys, k.String()+"="+val.String())
	}
	if !slices.Equal(keys, []string{"group=", "version=v1", "kind=Pod"}) {
		t.Errorf("members %q", keys)
	}
	for _, c := range []struct {
		v    jsonview.Value
		want int
	}{{v.At("object", "spec", "containers"), 2}, {v.Get("kind"), 3}, {v.Get("none"), 0}, {v.Get("empty"), 0}, {v.Get("operation"), 0}} {
		if got := c.v.Len(); got != c.want {
			t.Errorf("Len(%s) = %d, want %d", c.v.Raw(), got, c.want)
		}
	}
}

// TestRequestsWithoutAllocating: what a validating plugin reads of a request costs no
// allocation, so that its calls do not run the guest's allocator and collector.
func TestRequestsWithoutAllocating(t *testing.T) {
	v := jsonview.Parse([]byte(doc))
	allocs := testing.AllocsPerRun(100, func() {
		if !v.Get("operation").Is("CREATE") || !v.At("object", "metadata", "labels").Has("team") {
			t.Fatal("wrong answer")
		}
		for c := range v.At("object", "spec", "containers").Items() {
			if len(c.Get("image").Bytes()) == 0 {
				t.Fatal("no image")
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
}

// FuzzView: on any valid JSON, every value the view yields is what encoding/json decodes
// at the same place.
func FuzzView(f *testing.F) {
	for _, s := range []string{doc, `[]`, `"x"`, `{"a":[1,{"b":"\\"}],"c":"\u00e9"}`, `{"a\"b":1}`, ` [ 1 , "2" , {} ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			// Whatever the bytes, reading them answers without panicking.
			walk(jsonview.Parse(b), 0)
			return
		}
		check(t, jsonview.Parse(b))
	})
}

// walk reads everything under v.
func walk(v jsonview.Value, depth int) {
	_, _, _ = v.String(), v.Is("a"), v.Bytes()
	_, _ = v.Int()
	_ = v.Get("a").Exists() || v.Index(1).Exists() || v.Len() > 0
	if depth > 8 {
		return
	}
	for item := range v.Items() {
		walk(item, depth+1)
	}
	for k, val := range v.Members() {
		walk(k, depth+1)
		walk(val, depth+1)
	}
}

// check compares v and everything under it with encoding/json's decoding.
func check(t *testing.T, v jsonview.Value) {
	var want any
	if err := json.Unmarshal(v.Raw(), &want); err != nil {
		// Valid JSON that does not decode into any: a number out of float64's range,
		// somewhere in v.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number") {
			t.Fatalf("%s: %v", v.Raw(), err)
		}
		return
	}
	switch w := want.(type) {
	case string:
		if v.String() != w || !v.Is(w) || string(v.Bytes()) != w {
			t.Fatalf("string %s: got %q, want %q", v.Raw(), v.String(), w)
		}
	case bool:
		if b, ok := v.Bool(); !ok || b != w {
			t.Fatalf("bool %s", v.Raw())
		}
	case float64:
		if f, ok := v.Float(); !ok || f != w {
			t.Fatalf("number %s: got %v, want %v", v.Raw(), f, w)
		}
	case nil:
		if v.Kind() != jsonview.Null {
			t.Fatalf("null %s: kind %d", v.Raw(), v.Kind())
		}
	case []any:
		n := 0
		for item := range v.Items() {
			check(t, item)
			var got any
			_ = json.Unmarshal(item.Raw(), &got)
			if !reflect.DeepEqual(got, w[n]) {
				t.Fatalf("item %d of %s", n, v.Raw())
			}
			n++
		}
		if n != len(w) || v.Len() != n {
			t.Fatalf("%s: %d items, want %d", v.Raw(), n, len(w))
		}
	case map[string]any:
		seen := map[string]bool{}
		for k, val := range v.Members() {
			check(t, val)
			key := k.String()
			if seen[key] {
				continue // a duplicate: Get finds the first, encoding/json keeps the last
			}
			seen[key] = true
			if !v.Has(key) {
				t.Fatalf("%s: Has(%q) false", v.Raw(), key)
			}
			if first := v.Get(key); string(first.Raw()) != string(val.Raw()) {
				t.Fatalf("%s: Get(%q) = %s, want %s", v.Raw(), key, first.Raw(), val.Raw())
			}
		}
		if len(seen) != len(w) {
			t.Fatalf("%s: %d distinct members, want %d", v.Raw(), len(seen), len(w))
		}
	}
}

// TestStringLengths: strings are read eight bytes at a time, then byte by byte; escaped
// quotes and backslashes at every place in the words and across them end strings where
// encoding/json ends them.
func TestStringLengths(t *testing.T) {
	for n := range 80 {
		for _, esc := range []string{`"`, `\`, `\"`, `\\`, `é`} {
			for at := range n + 1 {
				s := strings.Repeat("x", at) + esc + strings.Repeat("y", n-at)
				q, _ := json.Marshal(s)
				doc := []byte(`{"a":[` + string(q) + `,{"k":` + string(q) + `}],"b":` + string(q) + `,"c":7}`)
				v := jsonview.Parse(doc)
				if c, ok := v.Get("c").Int(); !ok || c != 7 {
					t.Fatalf("%s: c = %d, %v", doc, c, ok)
				}
				if got := v.Get("b").String(); got != s {
					t.Fatalf("%s: b = %q", doc, got)
				}
				if got := v.Get("a").Index(1).Get("k").String(); got != s {
					t.Fatalf("%s: a[1].k = %q", doc, got)
				}
				if got := string(v.Get("a").Raw()); got != `[`+string(q)+`,{"k":`+string(q)+`}]` {
					t.Fatalf("%s: a = %s", doc, got)
				}
			}
		}
	}
}

// request is a pod create as the host sends it to a validating plugin that asked for
// compact pods (sdk/ABI.md §7.3, §7.5).
const request = `{"uid":"0b4c7c33-5d7c-4f45-9a57-2d2c8e5f1c11","kind":{"group":"","version":"v1","kind":"Pod"},` +
	`"resource":{"group":"","version":"v1","resource":"pods"},"name":"web-7d9f8c6b5-x2x4q","namespace":"default",` +
	`"operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:replicaset-controller",` +
	`"uid":"6f1d2c3b-1a2b-4c3d-8e9f-0a1b2c3d4e5f","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]},` +
	`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8c6b5-x2x4q","namespace":"default",` +
	`"labels":{"app":"web","pod-template-hash":"7d9f8c6b5","team":"a"}},` +
	`"spec":{"containers":[{"name":"web","image":"nginx:1.27"},{"name":"sidecar","image":"registry.example.com:5000/tools/proxy:v2.3.1"}]}}}`

// BenchmarkRequireLabelsPath reads what the require-labels example reads of a pod create
// (the operation, the labels, the kind and each container's image), natively: the
// profile of a guest call's reading without WebAssembly.
func BenchmarkRequireLabelsPath(b *testing.B) {
	req := []byte(request)
	b.ReportAllocs()
	for b.Loop() {
		v := jsonview.Parse(req)
		if op := v.Get("operation"); !op.Is("CREATE") && !op.Is("UPDATE") {
			b.Fatal("operation")
		}
		obj := v.Get("object")
		if !obj.At("metadata", "labels").Has("team") || !v.At("kind", "kind").Is("Pod") {
			b.Fatal("labels or kind")
		}
		n := 0
		spec := obj.Get("spec")
		for _, list := range [...]string{"initContainers", "containers"} {
			for c := range spec.Get(list).Items() {
				n += len(c.Get("image").Bytes())
			}
		}
		if n == 0 {
			b.Fatal("no images")
		}
	}
}
