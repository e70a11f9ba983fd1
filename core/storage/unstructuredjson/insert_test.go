package unstructuredjson

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

func TestAppendWithMember(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
		ok              bool
	}{
		{"between", `{"apiVersion":"v1","metadata":{"name":"a","uid":"u"},"spec":{}}`, `{"apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7","uid":"u"},"spec":{}}`, true},
		{"last", `{"metadata":{"name":"a"}}` + "\n", `{"metadata":{"name":"a","resourceVersion":"7"}}` + "\n", true},
		{"first", `{"metadata":{"uid":"u"},"z":1}`, `{"metadata":{"resourceVersion":"7","uid":"u"},"z":1}`, true},
		{"empty object", `{"a":[1,{"b":"}"}],"metadata":{}}`, `{"a":[1,{"b":"}"}],"metadata":{"resourceVersion":"7"}}`, true},
		{"nested values skipped", `{"metadata":{"labels":{"resourceVersion":"x","z":"\"}"},"managedFields":[{"a":{"f:b":{}}}],"name":"n"}}`,
			`{"metadata":{"labels":{"resourceVersion":"x","z":"\"}"},"managedFields":[{"a":{"f:b":{}}}],"name":"n","resourceVersion":"7"}}`, true},
		{"already there", `{"metadata":{"resourceVersion":"1"}}`, "", false},
		{"no object", `{"spec":{}}`, "", false},
		{"not an object", `{"metadata":"x"}`, "", false},
		{"escaped key", `{"metadata":{"a\u003cb":1}}`, "", false},
		{"escaped key before the object", `{"a\u003cb":1,"metadata":{"name":"a"}}`, `{"a\u003cb":1,"metadata":{"name":"a","resourceVersion":"7"}}`, true},
		{"whitespace", `{"metadata": {"name":"a"}}`, "", false},
		{"truncated", `{"metadata":{"name":"a"`, "", false},
		{"not a document", `[]`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AppendWithMember(nil, []byte(tc.doc), "metadata", "resourceVersion", "7")
			if !ok {
				got = nil
			}
			if ok != tc.ok || string(got) != tc.want {
				t.Fatalf("AppendWithMember(%s) = %s, %v; want %s, %v", tc.doc, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAppendWithMemberIsAppend: on random content, inserting the member into what Append
// wrote without it gives what Append writes with it, after what dst held.
func TestAppendWithMemberIsAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := []string{"annotations", "creationTimestamp", "generation", "labels", "managedFields", "name", "namespace", "uid", "zz", "a", "resourceVersionX", "resourceVersio"}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := r.IntN(7); {
		case n == 0 && depth < 3:
			m := map[string]any{}
			for range r.IntN(4) {
				m[keys[r.IntN(len(keys))]] = value(depth + 1)
			}
			return m
		case n == 1 && depth < 3:
			s := make([]any, r.IntN(3))
			for i := range s {
				s[i] = value(depth + 1)
			}
			return s
		case n == 2:
			return int64(r.IntN(1000))
		case n == 3:
			return r.IntN(2) == 0
		case n == 4:
			return nil
		}
		return []string{"x", `q"uo\te`, "}", "{[,]}", "<&>", "é"}[r.IntN(6)]
	}
	for i := range 3000 {
		md := map[string]any{}
		for range r.IntN(9) {
			md[keys[r.IntN(len(keys))]] = value(1)
		}
		obj := map[string]any{"apiVersion": "v1", "kind": "K", "metadata": md}
		for range r.IntN(3) {
			obj[keys[r.IntN(len(keys))]] = value(0)
		}
		obj["metadata"] = md
		without, ok := Append(nil, obj)
		if !ok {
			t.Fatalf("%d: Append declined %v", i, obj)
		}
		rv := fmt.Sprint(r.IntN(100000))
		with := maps.Clone(md)
		with["resourceVersion"] = rv
		withObj := maps.Clone(obj)
		withObj["metadata"] = with
		want, _ := Append(nil, withObj)
		got, ok := AppendWithMember([]byte("prefix,"), without, "metadata", "resourceVersion", rv)
		if !ok || string(got) != "prefix,"+string(want) {
			t.Fatalf("%d: AppendWithMember(%s) = %s, %v; want %s", i, without, got, ok, want)
		}
	}
}
