package rulecheck

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	apiextensionscel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// closedSchema's rules read objects with properties (compared with objects of their type,
// their fields tested with has and optional selection), lists of them, escaped names, a
// map and a nullable field: whatever CEL asks of an object. (CEL types an object by its
// schema's place: objects of two places are never compared.)
const closedSchema = `{"type":"object","properties":{"spec":{"type":"object",
  "x-kubernetes-validations":[
    {"rule":"!has(self.a) || [self.a].exists(x, x == self.a)"},
    {"rule":"!has(self.items) || self.items.all(i, self.items.exists(j, i == j))"},
    {"rule":"!has(self.items) || size(self.items) < 2 || self.items[0] != self.items[1] || !has(self.items[0].n) || self.items[0].n >= 0"},
    {"rule":"!has(self.a) || !has(self.b) || !has(self.a.s) || !has(self.b.s) || self.a.s == self.b.s || !has(self.a.n) || !has(self.b.n) || self.a.n != self.b.n"},
    {"rule":"!has(self.x__dash__y) || self.x__dash__y > 0"},
    {"rule":"self.?opt.orValue('') != 'bad'"},
    {"rule":"!has(self.m) || self.m.all(k, self.m[k] >= 0)"},
    {"rule":"!has(self.m) || !('zz' in self.m) || self.m.zz != 1"},
    {"rule":"!has(self.a) || !has(self.a.n) || self.a.n >= -5"},
    {"rule":"!has(self.b) || self.b.?n.orValue(0) != 2"}],
  "properties":{
    "a":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}}},
    "b":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}}},
    "items":{"type":"array","maxItems":4,"items":{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"}}}},
    "x-y":{"type":"integer"},
    "opt":{"type":"string"},
    "m":{"type":"object","maxProperties":4,"additionalProperties":{"type":"integer"}},
    "nested":{"type":"object","properties":{"deep":{"type":"object","nullable":true,"properties":{"v":{"type":"integer","nullable":true}}}},
      "x-kubernetes-validations":[{"rule":"!has(self.deep) || !has(self.deep.v) || self.deep.v < 100"}]}}}}}`

// TestClosedObjects: on random objects, the checker reading closed objects as closedObject
// gives the library validator's verdict, and the one the library's own values give.
func TestClosedObjects(t *testing.T) {
	s := structural(t, closedSchema)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil {
		t.Fatal("no checker")
	}
	spec := checker.root.properties["spec"]
	if spec == nil || !spec.closed || !spec.properties["nested"].closed {
		t.Fatal("spec's schema is closed but its nodes are not marked so")
	}
	library := New(s, celconfig.PerCallLimit)
	setClosed(library.root, false)
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	r := rand.New(rand.NewPCG(11, 12))
	small := func() map[string]any {
		o := map[string]any{}
		if r.IntN(4) > 0 {
			o["n"] = int64(r.IntN(4) - 1)
		}
		if r.IntN(3) > 0 {
			o["s"] = []string{"x", "y"}[r.IntN(2)]
		}
		return o
	}
	passed := 0
	for i := range 3000 {
		sp := map[string]any{}
		if r.IntN(5) > 0 {
			sp["a"] = small()
		}
		if r.IntN(5) > 0 {
			sp["b"] = small()
		}
		if r.IntN(3) > 0 {
			items := make([]any, r.IntN(3))
			for j := range items {
				items[j] = small()
			}
			sp["items"] = items
		}
		if r.IntN(2) == 0 {
			sp["x-y"] = int64(r.IntN(4) - 1)
		}
		if r.IntN(2) == 0 {
			sp["opt"] = []string{"ok", "bad"}[r.IntN(2)]
		}
		if r.IntN(2) == 0 {
			m := map[string]any{}
			for j := range r.IntN(3) {
				m[[]string{"p", "q", "zz"}[j]] = int64(r.IntN(3) - 1)
			}
			sp["m"] = m
		}
		switch r.IntN(4) {
		case 0:
			sp["nested"] = map[string]any{"deep": nil}
		case 1:
			sp["nested"] = map[string]any{"deep": map[string]any{"v": nil}}
		case 2:
			sp["nested"] = map[string]any{"deep": map[string]any{"v": int64(90 + r.IntN(20))}}
		}
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": sp}
		errs, _ := lib.Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
		want := len(errs) == 0
		got := checker.Passes(context.Background(), obj, celconfig.RuntimeCELCostBudget)
		viaLibrary := library.Passes(context.Background(), obj, celconfig.RuntimeCELCostBudget)
		if got != want || viaLibrary != want {
			t.Fatalf("object %d %v: closed objects %v, library's values %v, the library's validator %v (%v)", i, sp, got, viaLibrary, want, errs)
		}
		if got {
			passed++
		}
	}
	t.Logf("%d of 3000 random objects passed", passed)
	if passed < 300 || passed > 2700 {
		t.Fatalf("%d of 3000 random objects passed: the sample tells too little", passed)
	}
}

func TestClosed(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         bool
	}{
		{"properties only", `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}`, true},
		{"a list and a map", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}}}},"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`, true},
		{"unknown fields kept below", `{"type":"object","properties":{"a":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`, false},
		{"unknown fields kept in list items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}`, false},
		{"an embedded resource", `{"type":"object","properties":{"t":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"spec":{"type":"object"}}}}}`, false},
		{"in a map's values", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := closed(structural(t, tc.schema)); got != tc.want {
				t.Errorf("closed = %v, want %v", got, tc.want)
			}
		})
	}
}

// setClosed sets the closed flag of n's nodes that have it to v (false: read by the
// library's values alone).
func setClosed(n *node, v bool) {
	if n == nil {
		return
	}
	if n.closed {
		n.closed = v
	}
	setClosed(n.items, v)
	setClosed(n.additional, v)
	for _, p := range n.properties {
		setClosed(p, v)
	}
}

// TestClosedObjectMethods: Find, Get, Contains and Equal of a closedObject answer as the
// library's value does, for present, absent, null and escaped names and keys of another type.
func TestClosedObjectMethods(t *testing.T) {
	s := structural(t, `{"type":"object","properties":{"n":{"type":"integer"},"x-y":{"type":"string"},"o":{"type":"object","nullable":true,"properties":{"v":{"type":"integer"}}}}}`)
	sch := newIndexed(&model.Structural{Structural: s})
	value := map[string]any{"n": int64(3), "x-y": "s", "o": nil}
	lib := common.UnstructuredToVal(value, sch).(traits.Mapper)
	c, ok := closedVal(value, sch).(*closedObject)
	if !ok {
		t.Fatal("closedVal did not give a closedObject")
	}
	for _, key := range []ref.Val{types.String("n"), types.String("x__dash__y"), types.String("x-y"), types.String("o"), types.String("missing"), types.Int(1)} {
		lv, lf := lib.Find(key)
		cv, cf := c.Find(key)
		if lf != cf || !sameVal(lv, cv) {
			t.Errorf("Find(%v) = %v, %v; the library's %v, %v", key, cv, cf, lv, lf)
		}
		if lg, cg := lib.Get(key), c.Get(key); !sameVal(lg, cg) {
			t.Errorf("Get(%v) = %v; the library's %v", key, cg, lg)
		}
		if lc, cc := lib.Contains(key), c.Contains(key); !sameVal(lc, cc) {
			t.Errorf("Contains(%v) = %v; the library's %v", key, cc, lc)
		}
	}
	other := closedVal(map[string]any{"n": int64(3), "x-y": "s"}, sch)
	if got, want := c.Equal(other), lib.Equal(common.UnstructuredToVal(map[string]any{"n": int64(3), "x-y": "s"}, sch)); got != want {
		t.Errorf("Equal = %v; the library's %v", got, want)
	}
	if got := c.Equal(closedVal(map[string]any{"n": int64(4)}, sch)); got != types.False {
		t.Errorf("Equal of a different object = %v", got)
	}
}

// sameVal compares two CEL results, errors by their text.
func sameVal(a, b ref.Val) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if types.IsError(a) || types.IsError(b) {
		return types.IsError(a) && types.IsError(b) && a.(*types.Err).Error() == b.(*types.Err).Error()
	}
	return a.Equal(b) == types.True
}
