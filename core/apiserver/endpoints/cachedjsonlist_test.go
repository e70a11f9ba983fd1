package endpoints

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAppendWithResourceVersion(t *testing.T) {
	cases := []struct {
		name, in string
		want     string // "" = refused
	}{
		{"metadata after other keys", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a"},"spec":{"x":1}}` + "\n",
			`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"42"},"spec":{"x":1}}`},
		{"empty metadata", `{"metadata":{}}`, `{"metadata":{"resourceVersion":"42"}}`},
		{"metadata-like keys and braces in strings and nested values first",
			`{"a":{"metadata":{"name":"no"}},"b":["}",{"c":"\"{"}],"d":-1.5e3,"e":true,"f":null,"metadata":{"labels":{"k":"v"},"name":"x"}}`,
			`{"a":{"metadata":{"name":"no"}},"b":["}",{"c":"\"{"}],"d":-1.5e3,"e":true,"f":null,"metadata":{"labels":{"k":"v"},"name":"x","resourceVersion":"42"}}`},
		{"no metadata", `{"kind":"K"}`, ""},
		{"metadata not an object", `{"metadata":"x"}`, ""},
		{"not an object", `["metadata"]`, ""},
		{"truncated", `{"metadata":{"name":"a"`, ""},
		{"unterminated string", `{"metadata":{"name":"a}}`, ""},
		{"whitespace (not the codec's compact form)", `{ "metadata": {}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendWithResourceVersion([]byte("prefix,"), []byte(tc.in), 42)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %s, want refused", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix,"+tc.want {
				t.Fatalf("got  %s\nwant prefix,%s", got, tc.want)
			}
			var a, b any
			if err := json.Unmarshal(got[len("prefix,"):], &a); err != nil {
				t.Fatalf("result is not JSON: %v", err)
			}
			if err := json.Unmarshal([]byte(tc.want), &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("result %v, want %v", a, b)
			}
		})
	}
}
