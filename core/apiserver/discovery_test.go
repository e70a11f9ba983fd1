package apiserver

import (
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/core/apiserver/aggregator"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWithAggregated(t *testing.T) {
	local := []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"}, {Group: "example.com", Version: "v1"}}
	gv := func(g, v string) schema.GroupVersion { return schema.GroupVersion{Group: g, Version: v} }
	for _, tc := range []struct {
		name  string
		extra []aggregator.Version
		want  []schema.GroupVersion
	}{
		{"nothing aggregated", nil, local},
		{"a low-priority group goes last", []aggregator.Version{{GroupVersion: gv("metrics.k8s.io", "v1beta1"), GroupPriority: 100}},
			append(slices.Clone(local), gv("metrics.k8s.io", "v1beta1"))},
		{"a high-priority group goes before lower local ones", []aggregator.Version{{GroupVersion: gv("early.io", "v1"), GroupPriority: 17450}},
			[]schema.GroupVersion{{Version: "v1"}, gv("apps", "v1"), gv("early.io", "v1"), gv("batch", "v1"), gv("example.com", "v1")}},
		{"a new version of a local group joins it", []aggregator.Version{{GroupVersion: gv("apps", "v2"), GroupPriority: 100}},
			[]schema.GroupVersion{{Version: "v1"}, gv("apps", "v1"), gv("apps", "v2"), gv("batch", "v1"), gv("example.com", "v1")}},
		{"a version that is also local is not listed twice", []aggregator.Version{{GroupVersion: gv("batch", "v1"), GroupPriority: 100}}, local},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := withAggregated(local, tc.extra); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAggregatedPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want schema.GroupVersion
		ok   bool
	}{
		{"/apis/metrics.k8s.io/v1beta1", schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}, true},
		{"/apis/metrics.k8s.io/v1beta1/namespaces/x/pods", schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}, true},
		{"/apis/metrics.k8s.io", schema.GroupVersion{}, false},
		{"/apis", schema.GroupVersion{}, false},
		{"/api/v1/pods", schema.GroupVersion{}, false},
	} {
		got, ok := aggregatedPath(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
