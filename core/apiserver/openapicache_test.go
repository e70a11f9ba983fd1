package apiserver

import (
	"testing"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TestMergedOpenAPICache: a group version whose documents did not change keeps its
// encoding (the very bytes), one whose documents changed is encoded anew, and one no
// longer served is forgotten.
func TestMergedOpenAPICache(t *testing.T) {
	doc := func(title string) *spec3.OpenAPI {
		return &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: title}}}
	}
	a, b, c := doc("a"), doc("b"), doc("c")
	var cache mergedOpenAPICache
	first, err := cache.encode(map[string][]*spec3.OpenAPI{"apis/x/v1": {a}, "apis/y/v1": {b}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		own       map[string][]*spec3.OpenAPI
		reused    []string
		reencoded []string
	}{
		{name: "nothing changed", own: map[string][]*spec3.OpenAPI{"apis/x/v1": {a}, "apis/y/v1": {b}}, reused: []string{"apis/x/v1", "apis/y/v1"}},
		{name: "one group version changed", own: map[string][]*spec3.OpenAPI{"apis/x/v1": {a}, "apis/y/v1": {c}}, reused: []string{"apis/x/v1"}, reencoded: []string{"apis/y/v1"}},
		{name: "a document added to a group version", own: map[string][]*spec3.OpenAPI{"apis/x/v1": {a, b}, "apis/y/v1": {b}}, reused: []string{"apis/y/v1"}, reencoded: []string{"apis/x/v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache.byGV = nil
			if _, err := cache.encode(map[string][]*spec3.OpenAPI{"apis/x/v1": {a}, "apis/y/v1": {b}}); err != nil {
				t.Fatal(err)
			}
			before := map[string][]byte{"apis/x/v1": cache.byGV["apis/x/v1"].json, "apis/y/v1": cache.byGV["apis/y/v1"].json}
			got, err := cache.encode(tc.own)
			if err != nil {
				t.Fatal(err)
			}
			for _, gv := range tc.reused {
				if &got[gv][0] != &before[gv][0] {
					t.Errorf("%s was encoded again", gv)
				}
			}
			for _, gv := range tc.reencoded {
				if &got[gv][0] == &before[gv][0] {
					t.Errorf("%s kept its old encoding", gv)
				}
			}
		})
	}
	if string(first["apis/x/v1"]) == "" {
		t.Error("nothing encoded")
	}
	if _, err := cache.encode(map[string][]*spec3.OpenAPI{"apis/x/v1": {a}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.byGV["apis/y/v1"]; ok {
		t.Error("a group version no longer served is still cached")
	}
}
