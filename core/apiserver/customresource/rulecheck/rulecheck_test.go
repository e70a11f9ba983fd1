package rulecheck

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionscel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// structural reads a v1 OpenAPI schema written as JSON into a structural schema, as the
// CRD serving code does.
func structural(t *testing.T, schemaJSON string) *structuralschema.Structural {
	t.Helper()
	var v1 apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(schemaJSON), &v1); err != nil {
		t.Fatalf("schema: %v", err)
	}
	var internal apiextensionsinternal.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
		t.Fatalf("converting the schema: %v", err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("structural: %v", err)
	}
	return s
}

func object(t *testing.T, objJSON string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(objJSON), &obj); err != nil {
		t.Fatalf("object: %v", err)
	}
	return normalize(obj).(map[string]any)
}

// normalize turns encoding/json's float64 integers into int64, as the API server's
// unstructured decoder reads them.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	}
	return v
}

const widgetSchema = `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
  "spec":{"type":"object",
    "x-kubernetes-validations":[
      {"rule":"self.min <= self.max","message":"min must not exceed max"},
      {"rule":"!has(self.name) || self.name.startsWith('w')","messageExpression":"'bad name ' + self.name"},
      {"rule":"size(self.tags) <= 3","fieldPath":".tags","reason":"FieldValueForbidden"}],
    "properties":{
      "min":{"type":"integer"},"max":{"type":"integer"},"name":{"type":"string"},
      "tags":{"type":"array","items":{"type":"string","x-kubernetes-validations":[{"rule":"self != 'bad'"}]}},
      "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
        "items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"port":{"type":"integer"}},
          "x-kubernetes-validations":[{"rule":"!has(self.port) || self.port < 65536"}]}},
      "limits":{"type":"object","additionalProperties":{"type":"integer","x-kubernetes-validations":[{"rule":"self >= 0"}]}},
      "size":{"x-kubernetes-int-or-string":true,"x-kubernetes-validations":[{"rule":"type(self) == int ? self > 0 : self.endsWith('Gi')"}]},
      "divisor":{"type":"integer","x-kubernetes-validations":[{"rule":"100 / self > 1"}]},
      "when":{"type":"string","format":"date-time","x-kubernetes-validations":[{"rule":"self > timestamp('2020-01-01T00:00:00Z')"}]},
      "template":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,
        "x-kubernetes-validations":[{"rule":"self.kind == 'Pod' && self.metadata.name != 'forbidden'"}]}}}},
  "x-kubernetes-validations":[{"rule":"self.metadata.name != 'reserved'"}]}`

// TestPassesAgreesWithLibrary compares the checker's verdict with the errors of
// apiextensions-apiserver's CEL validator on the same objects: the checker must pass
// exactly the objects the library finds nothing wrong with.
func TestPassesAgreesWithLibrary(t *testing.T) {
	s := structural(t, widgetSchema)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil {
		t.Fatal("no checker built for a schema whose rules it mirrors")
	}
	// The same checker with its programs answering every rule.
	programsOnly := New(s, celconfig.PerCallLimit)
	withoutDirect(programsOnly.root)
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	cases := []struct {
		name   string
		obj    string
		budget int64
		passes bool
	}{
		{"valid", `{"metadata":{"name":"a"},"spec":{"min":1,"max":2,"name":"wx","tags":["a","b"],"ports":[{"name":"http","port":80}],
		  "limits":{"cpu":1},"size":"2Gi","divisor":3,"when":"2024-01-01T00:00:00Z","template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}}`, celconfig.RuntimeCELCostBudget, true},
		{"empty spec", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[]}}`, celconfig.RuntimeCELCostBudget, true},
		{"root rule", `{"metadata":{"name":"reserved"},"spec":{"min":0,"max":0,"tags":[]}}`, celconfig.RuntimeCELCostBudget, false},
		{"message", `{"metadata":{"name":"a"},"spec":{"min":3,"max":2,"tags":[]}}`, celconfig.RuntimeCELCostBudget, false},
		{"message expression", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"name":"x","tags":[]}}`, celconfig.RuntimeCELCostBudget, false},
		{"field path and reason", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":["a","b","c","d"]}}`, celconfig.RuntimeCELCostBudget, false},
		{"list item", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":["bad"]}}`, celconfig.RuntimeCELCostBudget, false},
		{"map-list item", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"ports":[{"name":"x","port":70000}]}}`, celconfig.RuntimeCELCostBudget, false},
		{"additional properties", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"limits":{"cpu":-1}}}`, celconfig.RuntimeCELCostBudget, false},
		{"int-or-string int", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"size":0}}`, celconfig.RuntimeCELCostBudget, false},
		{"int-or-string string", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"size":"2Mi"}}`, celconfig.RuntimeCELCostBudget, false},
		{"runtime error", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"divisor":0}}`, celconfig.RuntimeCELCostBudget, false},
		{"no such key", `{"metadata":{"name":"a"},"spec":{"max":0,"tags":[]}}`, celconfig.RuntimeCELCostBudget, false},
		{"date-time", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"when":"2019-01-01T00:00:00Z"}}`, celconfig.RuntimeCELCostBudget, false},
		{"embedded resource", `{"metadata":{"name":"a"},"spec":{"min":0,"max":0,"tags":[],"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forbidden"}}}}`, celconfig.RuntimeCELCostBudget, false},
		{"budget spent", `{"metadata":{"name":"a"},"spec":{"min":1,"max":2,"name":"wx","tags":["a","b"]}}`, 3, false},
		{"budget enough", `{"metadata":{"name":"a"},"spec":{"min":1,"max":2,"name":"wx","tags":["a","b"]}}`, 1000, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := object(t, c.obj)
			errs, _ := lib.Validate(context.Background(), nil, s, obj, nil, c.budget)
			libPasses := len(errs) == 0
			if libPasses != c.passes {
				t.Fatalf("the library's validator passes it: %v (errors %v), the case says %v", libPasses, errs, c.passes)
			}
			if got := checker.Passes(context.Background(), obj, c.budget); got != libPasses {
				t.Fatalf("checker passes it: %v; the library: %v (errors %v)", got, libPasses, errs)
			}
			if got := programsOnly.Passes(context.Background(), obj, c.budget); got != libPasses {
				t.Fatalf("checker without direct rules passes it: %v; the library: %v (errors %v)", got, libPasses, errs)
			}
		})
	}
}

// withoutDirect drops the direct rules of n and every node below it.
func withoutDirect(n *node) {
	if n == nil {
		return
	}
	n.direct, n.directCost = nil, 0
	withoutDirect(n.items)
	withoutDirect(n.additional)
	for _, p := range n.properties {
		withoutDirect(p)
	}
}

// TestPassesCancelledRequest compares the checker with the library on a request whose
// context is already cancelled: comprehensions check it (every celconfig.CheckFrequency
// iterations) and fail, other rules never read it. The checker evaluates a node's rules
// in one frame, the library each rule in its own; the verdicts must agree.
func TestPassesCancelledRequest(t *testing.T) {
	const schema = `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
  "spec":{"type":"object",
    "x-kubernetes-validations":[
      {"rule":"self.min <= self.max"},
      {"rule":"!has(self.tags) || self.tags.all(t, size(t) < 10)"},
      {"rule":"self.min >= 0"}],
    "properties":{"min":{"type":"integer"},"max":{"type":"integer"},
      "tags":{"type":"array","maxItems":1000,"items":{"type":"string","maxLength":20}}}}}}`
	s := structural(t, schema)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil {
		t.Fatal("no checker built")
	}
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	many := make([]any, 300)
	for i := range many {
		many[i] = "tag"
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		obj  map[string]any
		// passes is the verdict on the cancelled request, live on a live one.
		passes, live bool
	}{
		{"no comprehension evaluated", map[string]any{"spec": map[string]any{"min": int64(1), "max": int64(2)}}, true, true},
		{"a short comprehension", map[string]any{"spec": map[string]any{"min": int64(1), "max": int64(2), "tags": []any{"a", "b"}}}, true, true},
		{"a comprehension long enough to check the context", map[string]any{"spec": map[string]any{"min": int64(1), "max": int64(2), "tags": many}}, false, true},
		{"a failing rule", map[string]any{"spec": map[string]any{"min": int64(3), "max": int64(2)}}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs, _ := lib.Validate(cancelled, nil, s, c.obj, nil, celconfig.RuntimeCELCostBudget)
			libPasses := len(errs) == 0
			if libPasses != c.passes {
				t.Fatalf("the library's validator passes it: %v (errors %v), the case says %v", libPasses, errs, c.passes)
			}
			if got := checker.Passes(cancelled, c.obj, celconfig.RuntimeCELCostBudget); got != libPasses {
				t.Fatalf("checker passes it: %v; the library: %v (errors %v)", got, libPasses, errs)
			}
			if got := checker.Passes(context.Background(), c.obj, celconfig.RuntimeCELCostBudget); got != c.live {
				t.Fatalf("on a live request the checker passes it: %v, the case says %v", got, c.live)
			}
		})
	}
}

// TestJoinedRules checks the node programs of all of a node's rules joined with &&: the
// static bound that decides whether they stand in for the rules, and, on random objects
// where they do, that they give the library's verdict and cost what the rules one by
// one cost together.
func TestJoinedRules(t *testing.T) {
	t.Run("static bound", func(t *testing.T) {
		cases := []struct {
			name   string
			schema string
			worst  uint64
		}{
			// The bench's five rules on spec: 5 + 3 + 5 + 6 + 4.
			{"singleton node", benchSchema, 23},
			{"list with maxItems", `{"type":"object","properties":{"spec":{"type":"object","properties":{
			  "items":{"type":"array","maxItems":10,"items":{"type":"integer","x-kubernetes-validations":[{"rule":"self > 0"},{"rule":"self < 10"}]}}}}}}`, 10 * (2 + 2)},
			{"map with maxProperties in a list", `{"type":"object","properties":{"spec":{"type":"object","properties":{
			  "items":{"type":"array","maxItems":4,"items":{"type":"object","maxProperties":3,"additionalProperties":{"type":"integer","x-kubernetes-validations":[{"rule":"self > 0"}]}}}}}}}`, 4 * 3 * 2},
			{"unbounded list", widgetSchema, math.MaxUint64},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				checker := New(structural(t, c.schema), celconfig.PerCallLimit)
				if checker == nil {
					t.Fatal("no checker")
				}
				if checker.worstCost != c.worst {
					t.Fatalf("worst-case cost %d, want %d", checker.worstCost, c.worst)
				}
			})
		}
	})
	const schema = `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
  "spec":{"type":"object",
    "x-kubernetes-validations":[
      {"rule":"self.n01 <= self.n02 // a comment ending the rule"},
      {"rule":"!has(self.s01) || self.s01 != 'forbidden'"},
      {"rule":"!has(self.s02) || self.s02.startsWith('g')"},
      {"rule":"self.n03 + self.n04 < 1000"},
      {"rule":"!has(self.tags) || self.tags.all(t, size(t) < 8)"},
      {"rule":"100 / self.n05 > 1"}],
    "properties":{
      "s01":{"type":"string","maxLength":16},"s02":{"type":"string","maxLength":16},
      "n01":{"type":"integer"},"n02":{"type":"integer"},"n03":{"type":"integer"},"n04":{"type":"integer"},"n05":{"type":"integer"},
      "tags":{"type":"array","maxItems":8,"items":{"type":"string","maxLength":16,"x-kubernetes-validations":[{"rule":"self != 'bad'"}]}}}}}}`
	s := structural(t, schema)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil {
		t.Fatal("no checker")
	}
	if spec := checker.root.properties["spec"]; spec == nil || spec.all == nil {
		t.Fatal("spec's rules were not joined")
	}
	if checker.worstCost > celconfig.RuntimeCELCostBudget {
		t.Fatalf("worst-case cost %d over the budget: the joined program would not be used", checker.worstCost)
	}
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	r := rand.New(rand.NewPCG(7, 8))
	words := []string{"gadget", "forbidden", "bad", "x", "longer-than-eight", ""}
	passed := 0
	for i := range 2000 {
		// Mostly valid values, each field sometimes missing or failing its rule.
		word := func() string {
			if r.IntN(12) == 0 {
				return words[r.IntN(len(words))]
			}
			return "gadget"
		}
		spec := map[string]any{}
		for _, k := range []string{"n01", "n02", "n03", "n04"} {
			if r.IntN(30) > 0 {
				spec[k] = int64(r.IntN(520) - 10)
			}
		}
		if r.IntN(30) > 0 {
			spec["n05"] = int64(r.IntN(45))
		}
		for _, k := range []string{"s01", "s02"} {
			if r.IntN(2) == 0 {
				spec[k] = word()
			}
		}
		if r.IntN(2) == 0 {
			tags := make([]any, r.IntN(6))
			for j := range tags {
				tags[j] = word()
			}
			spec["tags"] = tags
		}
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": spec}
		errs, _ := lib.Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
		joinedBudget, oneByOne := int64(celconfig.RuntimeCELCostBudget), int64(celconfig.RuntimeCELCostBudget)
		joined := checker.root.passes(context.Background(), obj, &joinedBudget, true)
		byRule := checker.root.passes(context.Background(), obj, &oneByOne, false)
		if joined != (len(errs) == 0) || byRule != joined {
			t.Fatalf("object %d %v: joined %v, rule by rule %v, the library's errors %v", i, spec, joined, byRule, errs)
		}
		if joined {
			passed++
			if joinedBudget != oneByOne {
				t.Fatalf("object %d %v: the joined rules cost %d, one by one %d", i, spec,
					celconfig.RuntimeCELCostBudget-joinedBudget, celconfig.RuntimeCELCostBudget-oneByOne)
			}
		}
	}
	t.Logf("%d of 2000 random objects passed", passed)
	if passed < 100 || passed > 1900 {
		t.Fatalf("%d of 2000 random objects passed: the sample tells too little", passed)
	}
}

// TestNewDeclines checks that no checker is built where it cannot stand in for the
// library, so that the library's validator alone answers.
func TestNewDeclines(t *testing.T) {
	cases := []struct{ name, schema string }{
		{"no rules", `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"integer"}}}}}`},
		{"transition rule", `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"integer"}},
		  "x-kubernetes-validations":[{"rule":"self.a >= oldSelf.a"}]}}}`},
		{"rule under allOf", `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"integer"}},
		  "allOf":[{"x-kubernetes-validations":[{"rule":"self.a > 0"}]}],"x-kubernetes-validations":[{"rule":"self.a < 9"}]}}}`},
		{"compile error", `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"integer"}},
		  "x-kubernetes-validations":[{"rule":"self.b > 0"}]}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if New(structural(t, c.schema), celconfig.PerCallLimit) != nil {
				t.Fatal("a checker was built")
			}
		})
	}
}

// benchSchema is the crd bench's Gizmo: 20 fields under spec and 5 rules on it.
const benchSchema = `{"type":"object","required":["spec"],"properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
  "spec":{"type":"object",
    "x-kubernetes-validations":[
      {"rule":"self.n01 <= self.n02","message":"n01 must not exceed n02"},
      {"rule":"self.s01 != 'forbidden'"},
      {"rule":"!has(self.s02) || self.s02.startsWith('g')"},
      {"rule":"self.n03 + self.n04 < 1000000"},
      {"rule":"size(self.s03) <= 32"}],
    "properties":{
      "s01":{"type":"string","maxLength":64},"s02":{"type":"string","maxLength":64},"s03":{"type":"string","maxLength":64},
      "s04":{"type":"string","maxLength":64},"s05":{"type":"string","maxLength":64},"s06":{"type":"string","maxLength":64},
      "s07":{"type":"string","maxLength":64},"s08":{"type":"string","maxLength":64},"s09":{"type":"string","maxLength":64},
      "s10":{"type":"string","maxLength":64},
      "n01":{"type":"integer","minimum":0},"n02":{"type":"integer","minimum":0},"n03":{"type":"integer","minimum":0},
      "n04":{"type":"integer","minimum":0},"n05":{"type":"integer","minimum":0},"n06":{"type":"integer","minimum":0},
      "n07":{"type":"integer","minimum":0},"n08":{"type":"integer","minimum":0},"n09":{"type":"integer","minimum":0},
      "n10":{"type":"integer","minimum":0}}}}}`

const benchObject = `{"apiVersion":"bench.example.com/v1","kind":"Gizmo","metadata":{"name":"g-1","namespace":"default"},"spec":{
  "s01":"gadget-value","s02":"gadget-value","s03":"gadget-value","s04":"gadget-value","s05":"gadget-value",
  "s06":"gadget-value","s07":"gadget-value","s08":"gadget-value","s09":"gadget-value","s10":"gadget-value",
  "n01":1,"n02":2,"n03":3,"n04":4,"n05":5,"n06":6,"n07":7,"n08":8,"n09":9,"n10":10}}`

// BenchmarkPasses times the checker on the crd bench's object, beside the library's
// validator on the same object.
func BenchmarkPasses(b *testing.B) {
	t := &testing.T{}
	s := structural(t, benchSchema)
	obj := object(t, benchObject)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil {
		b.Fatal("no checker")
	}
	ctx := context.Background()
	b.Run("checker", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !checker.Passes(ctx, obj, celconfig.RuntimeCELCostBudget) {
				b.Fatal("the object does not pass")
			}
		}
	})
	programsOnly := New(s, celconfig.PerCallLimit)
	withoutDirect(programsOnly.root)
	b.Run("checker, programs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !programsOnly.Passes(ctx, obj, celconfig.RuntimeCELCostBudget) {
				b.Fatal("the object does not pass")
			}
		}
	})
	b.Run("checker, rule by rule", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			budget := int64(celconfig.RuntimeCELCostBudget)
			if !programsOnly.root.passes(ctx, obj, &budget, false) {
				b.Fatal("the object does not pass")
			}
		}
	})
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs, _ := lib.Validate(ctx, nil, s, obj, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}
