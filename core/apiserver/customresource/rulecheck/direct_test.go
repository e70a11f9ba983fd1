package rulecheck

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	apiextensionscel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// directSchema is the schema the random rules of TestDirectAgreesWithCEL are written
// over: a spec of integers, strings, a boolean and a nested object, the rule on spec.
func directSchema(rule string) string {
	return `{"type":"object","properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
  "spec":{"type":"object","x-kubernetes-validations":[{"rule":` + fmt.Sprintf("%q", rule) + `}],
    "properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer","format":"int32"},
      "s":{"type":"string"},"t":{"type":"string","maxLength":8},"d":{"type":"string","format":"date-time"},
      "f":{"type":"boolean"},"namespace":{"type":"string"},
      "o":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}},
      "m":{"type":"object","additionalProperties":{"type":"integer"}}}}}}`
}

// ruleGen writes random rules over directSchema's spec: mostly of the shapes direct
// rules answer, some not (the rule then has no direct form).
type ruleGen struct{ r *rand.Rand }

func (g ruleGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g ruleGen) boolean(depth int) string {
	if depth <= 0 {
		return g.pick("true", "false", "self.f", "has(self.a)", "has(self.s)", "has(self.o)", "has(self.o.x)", "has(self.f)")
	}
	switch g.r.IntN(12) {
	case 0:
		return "!" + g.boolean(depth-1)
	case 1, 2:
		return "(" + g.boolean(depth-1) + " && " + g.boolean(depth-1) + ")"
	case 3, 4:
		return "(" + g.boolean(depth-1) + " || " + g.boolean(depth-1) + ")"
	case 5, 6:
		return g.integer(depth-1) + g.pick(" < ", " <= ", " > ", " >= ", " == ", " != ") + g.integer(depth-1)
	case 7:
		return g.str(depth-1) + g.pick(" == ", " != ") + g.literal()
	case 8:
		return g.literal() + g.pick(" == ", " != ") + g.str(depth-1)
	case 9:
		return g.str(depth-1) + g.pick(".startsWith(", ".endsWith(") + g.literal() + ")"
	case 10:
		// Shapes left to CEL.
		return g.pick("self.s < 'm'", "self.a / 2 > 1", "self.f ? true : false", "self.s == self.t", "self.s.contains('a')",
			"self.m.all(k, self.m[k] > 0)", "self.d > timestamp('2020-01-01T00:00:00Z')", "self.__namespace__ == 'x'", "self.namespace == 'x'")
	default:
		return g.boolean(0) + g.pick(" == ", " != ") + g.boolean(0)
	}
}

func (g ruleGen) integer(depth int) string {
	if depth <= 0 || g.r.IntN(3) == 0 {
		return g.pick("self.a", "self.b", "self.c", "self.o.x", "0", "1", "-1", "1000000", "9223372036854775807", "-9223372036854775807", "size(self.s)", "self.t.size()")
	}
	switch g.r.IntN(4) {
	case 0:
		return "-" + g.integer(depth-1)
	case 1:
		return "size(" + g.str(depth-1) + ")"
	default:
		return "(" + g.integer(depth-1) + g.pick(" + ", " - ", " * ") + g.integer(depth-1) + ")"
	}
}

func (g ruleGen) str(int) string { return g.pick("self.s", "self.t", "self.o.y", g.literal()) }

func (g ruleGen) literal() string { return g.pick("''", "'g'", "'gadget'", "'é'", "'日本'", "'ab'") }

// randomSpec is a spec of directSchema, each field sometimes missing, null or of a Go
// type the API server's decoder never gives the field.
func randomSpec(r *rand.Rand) map[string]any {
	ints := []any{int64(0), int64(1), int64(-1), int64(2), int64(1000000), int64(math.MaxInt64), int64(math.MinInt64), int64(1) << 32, 1.5, nil}
	strs := []any{"", "g", "gadget", "gé", "é", "日本語", "ab", "bag", int64(3), nil}
	spec := map[string]any{}
	maybe := func(k string, vs []any) {
		if r.IntN(6) > 0 {
			spec[k] = vs[r.IntN(len(vs))]
		}
	}
	maybe("a", ints)
	maybe("b", ints)
	maybe("c", ints)
	maybe("s", strs)
	maybe("t", strs)
	maybe("namespace", strs)
	maybe("f", []any{true, false, "true", nil})
	if r.IntN(6) > 0 {
		o := map[string]any{}
		if r.IntN(4) > 0 {
			o["x"] = ints[r.IntN(len(ints))]
		}
		if r.IntN(4) > 0 {
			o["y"] = strs[r.IntN(len(strs))]
		}
		spec["o"] = o
	}
	return spec
}

// TestDirectAgreesWithCEL compares the direct forms of random rules with CEL: wherever
// a direct rule knows its answer, the library's validator must find the object valid
// exactly when that answer is true, and CEL's cost tracker must charge no more than the
// direct rule's cost bound.
func TestDirectAgreesWithCEL(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	g := ruleGen{r}
	var rules, direct, known, trues int
	for range 600 {
		rule := g.boolean(1 + r.IntN(3))
		s := structural(t, directSchema(rule))
		checker := New(s, celconfig.PerCallLimit)
		if checker == nil {
			continue // a rule that does not compile (a type error): the library alone
		}
		rules++
		n := checker.root.properties["spec"]
		if n == nil || len(n.programs) != 1 || n.programs[0].Program == nil {
			t.Fatalf("rule %q: no program on spec", rule)
		}
		if n.direct == nil {
			continue
		}
		direct++
		d := n.direct[0]
		lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
		for range 25 {
			spec := randomSpec(r)
			v, ok := d.eval(spec)
			if !ok {
				continue
			}
			known++
			if v.b {
				trues++
			}
			obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": spec}
			errs, _ := lib.Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
			if v.b != (len(errs) == 0) {
				t.Fatalf("rule %q on %v: direct answer %v, the library's errors %v", rule, spec, v.b, errs)
			}
			val, details, err := n.programs[0].Program.ContextEval(context.Background(), map[string]any{"self": common.UnstructuredToVal(spec, n.self)})
			if details == nil || details.ActualCost() == nil {
				t.Fatalf("rule %q: no cost details (%v, %v)", rule, val, err)
			}
			if cost := *details.ActualCost(); cost > d.cost {
				t.Fatalf("rule %q on %v: CEL charged %d, over the direct bound %d", rule, spec, cost, d.cost)
			}
		}
	}
	t.Logf("%d rules compiled, %d with a direct form; %d known answers, %d true", rules, direct, known, trues)
	if direct < rules/2 || known < 2000 || trues < known/5 || trues > known*4/5 {
		t.Fatalf("%d rules, %d direct, %d known answers, %d true: the sample tells too little", rules, direct, known, trues)
	}
}

// TestDirectDeclines lists shapes that have no direct form: CEL answers them.
func TestDirectDeclines(t *testing.T) {
	for _, rule := range []string{
		"self.s < 'm'",                               // string ordering
		"self.a / 2 > 1",                             // division (by zero is an error)
		"self.s == self.t",                           // strings of unbounded cost
		"self.s.contains('a')",                       // cost by the field's size
		"self.f ? true : false",                      // conditional
		"self.m.all(k, self.m[k] > 0)",               // comprehension
		"self.d > timestamp('2020-01-01T00:00:00Z')", // formatted string
		"self.__namespace__ == 'x'",                  // escaped name
		"self.o.x == 1 && self.m.size() == 0",        // map size
		"self.a == int(1u)",                          // unsigned literal
		"has(self.m.k)",                              // additional properties
		"[1, 2].exists(x, x == self.a)",              // list literal
		"self.a in [1, 2]",                           // membership
		"self.o == self.o",                           // object equality
		"int(self.s) == 1",                           // conversion
		"self.s.matches('^a') || self.s.size() == 0", // regular expression
		"self.a % 2 == 0",                            // modulo
		"double(self.a) > 1.5",                       // double
		"(self.a > 0)",                               // parentheses alone do not matter: this one is direct
	} {
		s := structural(t, directSchema(rule))
		checker := New(s, celconfig.PerCallLimit)
		if checker == nil {
			t.Fatalf("rule %q: no checker", rule)
		}
		got := checker.root.properties["spec"].direct != nil
		want := rule == "(self.a > 0)"
		if got != want {
			t.Errorf("rule %q: direct form %v, want %v", rule, got, want)
		}
	}
	// A resource root's apiVersion, kind and metadata are read through a schema of their
	// own; the root's other fields are direct.
	for rule, want := range map[string]bool{"self.kind == 'Widget'": false, "has(self.metadata)": false, "has(self.spec)": true} {
		s := structural(t, `{"type":"object","x-kubernetes-validations":[{"rule":`+fmt.Sprintf("%q", rule)+`}],"properties":{
  "apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"spec":{"type":"object","properties":{"a":{"type":"integer"}}}}}`)
		checker := New(s, celconfig.PerCallLimit)
		if checker == nil {
			t.Fatalf("rule %q: no checker", rule)
		}
		if got := checker.root.direct != nil; got != want {
			t.Errorf("root rule %q: direct form %v, want %v", rule, got, want)
		}
	}
}

// TestDirectBudget compares the checker with the library's validator on the bench's
// object under every budget from nothing to more than its rules cost: where the direct
// rules' bound does not fit, the programs answer, so the verdicts agree throughout.
func TestDirectBudget(t *testing.T) {
	s := structural(t, benchSchema)
	obj := object(t, benchObject)
	checker := New(s, celconfig.PerCallLimit)
	if checker == nil || checker.root.properties["spec"].direct == nil {
		t.Fatal("the bench's rules have no direct form")
	}
	lib := apiextensionscel.NewValidator(s, true, celconfig.PerCallLimit)
	bound := int64(checker.root.properties["spec"].directCost)
	passed := 0
	for budget := range bound + 10 {
		errs, _ := lib.Validate(context.Background(), nil, s, obj, nil, budget)
		got := checker.Passes(context.Background(), obj, budget)
		if got != (len(errs) == 0) {
			t.Fatalf("budget %d: checker passes %v, the library's errors %v", budget, got, errs)
		}
		if got {
			passed++
		}
	}
	if passed == 0 || passed == int(bound+10) {
		t.Fatalf("%d of %d budgets passed: the sample tells too little", passed, bound+10)
	}
}
