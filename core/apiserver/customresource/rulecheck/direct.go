package rulecheck

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// A direct rule answers a rule of a small, common shape — comparisons of integer
// fields, a string field against a literal, has(), size() of a string, a literal
// prefix or suffix, joined by !, && and || — by reading the object itself, without
// building CEL values, an execution frame and a cost tracker: that setup and the cost
// tracking were most of a simple rule's evaluation. It answers only where it knows CEL's
// answer: a field that is absent or of an unexpected Go type, an integer overflow, or
// anything else outside those shapes leaves the rule unknown, and the node's programs
// are evaluated as before. Its verdict is taken only when it is true for every rule of
// a node; CEL would then give true without an error.
//
// The cost limits cannot tell otherwise: every node of a direct rule is evaluated at
// most once (there are no comprehensions), and the cost CEL's tracker charges for each
// is bounded by a constant of the rule (cost): one for an identifier, a field and a
// call of a fixed cost, and for the string calls (==, != with a literal, startsWith and
// endsWith of a literal) a tenth of the literal's size, rounded up, which its byte
// length bounds. Those bounds, not the actual costs, are taken from the budget.
type direct struct {
	eval func(self any) (v dval, known bool)
	kind dkind
	// cost bounds what CEL's cost tracker charges for evaluating the expression.
	cost uint64
	// props is the schema of an object value: its fields are looked up there.
	props *structuralschema.Structural
}

type dkind uint8

const (
	dBool dkind = iota + 1
	dInt
	dString
	dObject
)

// dval is a value of a direct rule: b, i or s by the expression's kind, m for an object.
type dval struct {
	b bool
	i int64
	s string
	m map[string]any
}

// compileDirect returns the direct form of a checked rule of the node whose schema is s,
// or nil when the rule is not of a shape it answers. root says s is a resource root (or
// an embedded resource), whose apiVersion, kind and metadata CEL reads through a schema
// of its own: those are left to CEL.
func compileDirect(a *cel.Ast, s *structuralschema.Structural, root bool) *direct {
	if a == nil || !a.IsChecked() {
		return nil
	}
	d := directExpr(a.NativeRep().Expr(), s, root)
	if d == nil || d.kind != dBool {
		return nil
	}
	return d
}

// scalarKind is the kind of a field's value under s, as CEL reads it: integers, strings
// without a format (a format can make CEL read a string as a timestamp, a duration or
// bytes) and booleans; objects with properties are read field by field. Anything else
// is left to CEL.
func scalarKind(s *structuralschema.Structural) dkind {
	if s == nil || s.XIntOrString || s.XPreserveUnknownFields || s.XEmbeddedResource {
		return 0
	}
	switch s.Type {
	case "integer":
		return dInt
	case "string":
		if s.ValueValidation == nil || s.ValueValidation.Format == "" {
			return dString
		}
	case "boolean":
		return dBool
	case "object":
		if len(s.Properties) > 0 && s.AdditionalProperties == nil {
			return dObject
		}
	}
	return 0
}

// read is the value v of a field under kind k, or not known when v is not what the
// API server's decoder gives for such a field.
func read(v any, k dkind) (dval, bool) {
	switch k {
	case dInt:
		i, ok := v.(int64)
		return dval{i: i}, ok
	case dString:
		s, ok := v.(string)
		return dval{s: s}, ok
	case dBool:
		b, ok := v.(bool)
		return dval{b: b}, ok
	case dObject:
		m, ok := v.(map[string]any)
		return dval{m: m}, ok && m != nil
	}
	return dval{}, false
}

func directExpr(e celast.Expr, s *structuralschema.Structural, root bool) *direct {
	switch e.Kind() {
	case celast.IdentKind:
		if e.AsIdent() != "self" {
			return nil
		}
		k := scalarKind(s)
		if k == 0 {
			return nil
		}
		return &direct{kind: k, cost: 1, props: s, eval: func(self any) (dval, bool) { return read(self, k) }}
	case celast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.Int:
			return &direct{kind: dInt, eval: func(any) (dval, bool) { return dval{i: int64(v)}, true }}
		case types.String:
			return &direct{kind: dString, eval: func(any) (dval, bool) { return dval{s: string(v)}, true }}
		case types.Bool:
			return &direct{kind: dBool, eval: func(any) (dval, bool) { return dval{b: bool(v)}, true }}
		}
		return nil
	case celast.SelectKind:
		return directSelect(e.AsSelect(), s, root)
	case celast.CallKind:
		return directCall(e.AsCall(), s, root)
	}
	return nil
}

// directSelect reads a field of an object, or tests for it (has()). The name must be
// the field's own: CEL unescapes names with "__" in them.
func directSelect(sel celast.SelectExpr, s *structuralschema.Structural, root bool) *direct {
	operand := directExpr(sel.Operand(), s, root)
	name := sel.FieldName()
	if operand == nil || operand.kind != dObject || strings.Contains(name, "__") {
		return nil
	}
	if operand.props == s && root && (name == "apiVersion" || name == "kind" || name == "metadata") {
		return nil
	}
	prop, ok := operand.props.Properties[name]
	if !ok {
		return nil
	}
	cost := addCost(operand.cost, 1)
	k := scalarKind(&prop)
	if sel.IsTestOnly() {
		return &direct{kind: dBool, cost: cost, eval: func(self any) (dval, bool) {
			o, known := operand.eval(self)
			if !known {
				return dval{}, false
			}
			v, found := o.m[name]
			if !found {
				return dval{b: false}, true
			}
			// CEL reads a field it tests for: one it cannot read as its schema says (or
			// null) is left to CEL, which may answer with an error.
			_, ok := read(v, k)
			return dval{b: true}, ok
		}}
	}
	if k == 0 {
		return nil
	}
	return &direct{kind: k, cost: cost, props: &prop, eval: func(self any) (dval, bool) {
		o, known := operand.eval(self)
		if !known {
			return dval{}, false
		}
		v, found := o.m[name]
		if !found {
			// CEL's answer is an error: no such key.
			return dval{}, false
		}
		return read(v, k)
	}}
}

func directCall(call celast.CallExpr, s *structuralschema.Structural, root bool) *direct {
	var args []*direct
	if call.IsMemberFunction() {
		t := directExpr(call.Target(), s, root)
		if t == nil {
			return nil
		}
		args = append(args, t)
	}
	for _, a := range call.Args() {
		d := directExpr(a, s, root)
		if d == nil {
			return nil
		}
		args = append(args, d)
	}
	kinds := func(ks ...dkind) bool {
		if len(args) != len(ks) {
			return false
		}
		for i, k := range ks {
			if args[i].kind != k {
				return false
			}
		}
		return true
	}
	cost := uint64(1)
	for _, a := range args {
		cost = addCost(cost, a.cost)
	}
	fn := call.FunctionName()
	switch fn {
	case "_&&_", "_||_":
		if !kinds(dBool, dBool) {
			return nil
		}
		// Either side decides alone (false for &&, true for ||), whatever the other
		// gives, error included, as in CEL.
		decides := fn == "_||_"
		l, r := args[0], args[1]
		return &direct{kind: dBool, cost: cost, eval: func(self any) (dval, bool) {
			lv, lk := l.eval(self)
			if lk && lv.b == decides {
				return dval{b: decides}, true
			}
			rv, rk := r.eval(self)
			if rk && rv.b == decides {
				return dval{b: decides}, true
			}
			return dval{b: !decides}, lk && rk
		}}
	case "!_":
		if !kinds(dBool) {
			return nil
		}
		return unary(args[0], dBool, cost, func(v dval) (dval, bool) { return dval{b: !v.b}, true })
	case "_==_", "_!=_":
		if len(args) != 2 || args[0].kind != args[1].kind {
			return nil
		}
		eq := fn == "_==_"
		l, r := args[0], args[1]
		switch l.kind {
		case dInt, dBool:
			return &direct{kind: dBool, cost: cost, eval: binary(l, r, func(a, b dval) (dval, bool) {
				return dval{b: (a.i == b.i && a.b == b.b) == eq}, true
			})}
		case dString:
			// The cost of comparing strings is a tenth of the shorter one's size: a
			// literal bounds it.
			lit := max(literalLen(call, 0), literalLen(call, 1))
			if lit < 0 {
				return nil
			}
			return &direct{kind: dBool, cost: addCost(cost, uint64(lit)), eval: binary(l, r, func(a, b dval) (dval, bool) {
				return dval{b: (a.s == b.s) == eq}, true
			})}
		}
		return nil
	case "_<_", "_<=_", "_>_", "_>=_":
		if !kinds(dInt, dInt) {
			return nil
		}
		var cmp func(a, b int64) bool
		switch fn {
		case "_<_":
			cmp = func(a, b int64) bool { return a < b }
		case "_<=_":
			cmp = func(a, b int64) bool { return a <= b }
		case "_>_":
			cmp = func(a, b int64) bool { return a > b }
		default:
			cmp = func(a, b int64) bool { return a >= b }
		}
		return &direct{kind: dBool, cost: cost, eval: binary(args[0], args[1], func(a, b dval) (dval, bool) {
			return dval{b: cmp(a.i, b.i)}, true
		})}
	case "_+_", "_-_", "_*_":
		if !kinds(dInt, dInt) {
			return nil
		}
		var op func(a, b int64) (int64, bool)
		switch fn {
		case "_+_":
			op = addInt
		case "_-_":
			op = subInt
		default:
			op = mulInt
		}
		return &direct{kind: dInt, cost: cost, eval: binary(args[0], args[1], func(a, b dval) (dval, bool) {
			v, ok := op(a.i, b.i)
			// CEL's answer to an overflow is an error.
			return dval{i: v}, ok
		})}
	case "-_":
		if !kinds(dInt) {
			return nil
		}
		return unary(args[0], dInt, cost, func(v dval) (dval, bool) { return dval{i: -v.i}, v.i != math.MinInt64 })
	case "size":
		if !kinds(dString) {
			return nil
		}
		// CEL's size of a string counts its code points.
		return unary(args[0], dInt, cost, func(v dval) (dval, bool) { return dval{i: int64(utf8.RuneCountInString(v.s))}, true })
	case "startsWith", "endsWith":
		if !call.IsMemberFunction() || !kinds(dString, dString) {
			return nil
		}
		lit := literalLen(call, 1)
		if lit < 0 {
			return nil
		}
		has := strings.HasPrefix
		if fn == "endsWith" {
			has = strings.HasSuffix
		}
		return &direct{kind: dBool, cost: addCost(cost, uint64(lit)), eval: binary(args[0], args[1], func(a, b dval) (dval, bool) {
			return dval{b: has(a.s, b.s)}, true
		})}
	}
	return nil
}

// unary is a call of kind on x, unknown when x is.
func unary(x *direct, kind dkind, cost uint64, f func(v dval) (dval, bool)) *direct {
	return &direct{kind: kind, cost: cost, eval: func(self any) (dval, bool) {
		v, known := x.eval(self)
		if !known {
			return dval{}, false
		}
		return f(v)
	}}
}

// binary evaluates both sides of a call and applies f, unknown when either side is.
func binary(l, r *direct, f func(a, b dval) (dval, bool)) func(self any) (dval, bool) {
	return func(self any) (dval, bool) {
		a, ak := l.eval(self)
		if !ak {
			return dval{}, false
		}
		b, bk := r.eval(self)
		if !bk {
			return dval{}, false
		}
		return f(a, b)
	}
}

// literalLen is the byte length of the call's argument i (counting the target of a
// member call first) when it is a string literal, and -1 otherwise.
func literalLen(call celast.CallExpr, i int) int {
	var args []celast.Expr
	if call.IsMemberFunction() {
		args = append(args, call.Target())
	}
	args = append(args, call.Args()...)
	if i >= len(args) || args[i].Kind() != celast.LiteralKind {
		return -1
	}
	if s, ok := args[i].AsLiteral().(types.String); ok {
		return len(s)
	}
	return -1
}

func addCost(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	return s, (b >= 0) == (s >= a)
}

func subInt(a, b int64) (int64, bool) {
	d := a - b
	return d, (b >= 0) == (d <= a)
}

func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || p/b != a {
		return p, false
	}
	return p, true
}
