// Package schemacheck tells cheaply whether a custom object passes the OpenAPI value
// validations of its CRD version's structural schema (types, required, enum, bounds,
// lengths, patterns, item and property counts). apiextensions-apiserver validates with
// kube-openapi's validator, which builds a validator for every field of every object it
// checks; this checker is built once per schema. It only answers "passes": whoever gets
// false asks the library's validator for the errors, so every error keeps Kubernetes'
// exact form. A schema using anything the checker does not mirror exactly (formats,
// multipleOf, allOf/anyOf/oneOf/not, int-or-string, non-string enums) gets no checker.
package schemacheck

import (
	"math"
	"reflect"
	"regexp"
	"unicode/utf8"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// Checker checks objects against one structural schema.
type Checker struct {
	root *node
}

type node struct {
	typ      string
	nullable bool
	// anything is set for a node without a type or any validation of its own: every
	// value passes it.
	anything bool

	minimum, maximum             *float64
	exclusiveMin, exclusiveMax   bool
	minLength, maxLength         *int64
	pattern                      *regexp.Regexp
	minItems, maxItems           *int64
	minProperties, maxProperties *int64
	required                     []string
	enum                         map[string]struct{}

	properties map[string]*node
	items      *node
	// additional is the schema of values not named by properties; nil when they are
	// allowed unchecked.
	additional *node
}

// maxExact is the largest magnitude below which every integer is a float64 exactly.
const maxExact = 1 << 53

// New builds a checker for s, or returns nil when s is nil or uses a validation the
// checker does not mirror.
func New(s *structuralschema.Structural) *Checker {
	if s == nil {
		return nil
	}
	root, ok := build(s)
	if !ok {
		return nil
	}
	return &Checker{root: root}
}

func build(s *structuralschema.Structural) (*node, bool) {
	if s.XIntOrString {
		return nil, false
	}
	n := &node{typ: s.Type, nullable: s.Nullable}
	if v := s.ValueValidation; v != nil {
		if v.Format != "" || v.UniqueItems || v.MultipleOf != nil || len(v.AllOf) > 0 || len(v.OneOf) > 0 || len(v.AnyOf) > 0 || v.Not != nil {
			return nil, false
		}
		for _, b := range []*float64{v.Minimum, v.Maximum} {
			if b != nil && (math.IsNaN(*b) || math.Abs(*b) >= maxExact) {
				return nil, false
			}
			// kube-openapi reports a bound that is no integer on an integer as an error of
			// its own.
			if b != nil && s.Type == "integer" && *b != math.Trunc(*b) {
				return nil, false
			}
		}
		n.minimum, n.maximum, n.exclusiveMin, n.exclusiveMax = v.Minimum, v.Maximum, v.ExclusiveMinimum, v.ExclusiveMaximum
		n.minLength, n.maxLength = v.MinLength, v.MaxLength
		n.minItems, n.maxItems = v.MinItems, v.MaxItems
		n.minProperties, n.maxProperties = v.MinProperties, v.MaxProperties
		n.required = v.Required
		if v.Pattern != "" {
			re, err := regexp.Compile(v.Pattern)
			if err != nil {
				return nil, false
			}
			n.pattern = re
		}
		if v.Enum != nil {
			if s.Type != "string" {
				return nil, false
			}
			n.enum = make(map[string]struct{}, len(v.Enum))
			for _, e := range v.Enum {
				str, ok := e.Object.(string)
				if !ok {
					return nil, false
				}
				n.enum[str] = struct{}{}
			}
		}
	}
	if s.Type == "" {
		// Without a type, only the validations that apply to the value's own kind run;
		// the checker mirrors only the node that has none.
		if (s.ValueValidation != nil && !reflect.ValueOf(*s.ValueValidation).IsZero()) || s.Properties != nil || s.Items != nil || s.AdditionalProperties != nil {
			return nil, false
		}
		n.anything = true
		return n, true
	}
	if s.Items != nil {
		items, ok := build(s.Items)
		if !ok {
			return nil, false
		}
		n.items = items
	}
	if s.Properties != nil {
		n.properties = make(map[string]*node, len(s.Properties))
		for k := range s.Properties {
			p := s.Properties[k]
			pn, ok := build(&p)
			if !ok {
				return nil, false
			}
			n.properties[k] = pn
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		switch {
		case ap.Structural != nil:
			an, ok := build(ap.Structural)
			if !ok {
				return nil, false
			}
			n.additional = an
		case !ap.Bool:
			return nil, false
		}
	}
	return n, true
}

// Passes reports whether obj passes every value validation of the schema. False means
// "ask the library": obj may or may not be valid.
func (c *Checker) Passes(obj map[string]any) bool {
	if c == nil {
		return true
	}
	return c.root.passes(obj)
}

func (n *node) passes(v any) bool {
	if n.anything {
		return true
	}
	switch v := v.(type) {
	case nil:
		// Nulls are rare here (the coercion drops those the schema does not allow);
		// the library decides.
		return false
	case string:
		return n.typ == "string" && n.passesString(v)
	case bool:
		return n.typ == "boolean"
	case int64:
		if n.typ != "integer" && n.typ != "number" {
			return false
		}
		return v > -maxExact && v < maxExact && n.passesInt(v)
	case float64:
		return n.typ == "number" && n.passesFloat(v)
	case map[string]any:
		return n.typ == "object" && n.passesObject(v)
	case []any:
		return n.typ == "array" && n.passesArray(v)
	default:
		return false
	}
}

func (n *node) passesString(s string) bool {
	if n.minLength != nil || n.maxLength != nil {
		l := int64(utf8.RuneCountInString(s))
		if (n.minLength != nil && l < *n.minLength) || (n.maxLength != nil && l > *n.maxLength) {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return false
	}
	if n.enum != nil {
		if _, ok := n.enum[s]; !ok {
			return false
		}
	}
	return true
}

// passesInt checks an integer's bounds. kube-openapi compares an integer with a bound
// truncated to an integer (on a number, a bound may have a fraction): the integer
// passes here only when it passes both that comparison and the comparison as numbers.
// The checker only sees integers a float64 holds exactly.
func (n *node) passesInt(v int64) bool {
	f := float64(v)
	if n.minimum != nil && (!atLeast(f, *n.minimum, n.exclusiveMin) || !atLeast(f, math.Trunc(*n.minimum), n.exclusiveMin)) {
		return false
	}
	if n.maximum != nil && (!atLeast(*n.maximum, f, n.exclusiveMax) || !atLeast(math.Trunc(*n.maximum), f, n.exclusiveMax)) {
		return false
	}
	return true
}

func (n *node) passesFloat(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if n.minimum != nil && !atLeast(v, *n.minimum, n.exclusiveMin) {
		return false
	}
	if n.maximum != nil && !atLeast(*n.maximum, v, n.exclusiveMax) {
		return false
	}
	return true
}

// atLeast reports a >= b, or a > b when strict.
func atLeast(a, b float64, strict bool) bool {
	if strict {
		return a > b
	}
	return a >= b
}

func (n *node) passesObject(m map[string]any) bool {
	l := int64(len(m))
	if (n.minProperties != nil && l < *n.minProperties) || (n.maxProperties != nil && l > *n.maxProperties) {
		return false
	}
	for _, r := range n.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, v := range m {
		if p, ok := n.properties[k]; ok {
			if !p.passes(v) {
				return false
			}
			continue
		}
		if n.additional != nil && !n.additional.passes(v) {
			return false
		}
	}
	return true
}

func (n *node) passesArray(a []any) bool {
	l := int64(len(a))
	if (n.minItems != nil && l < *n.minItems) || (n.maxItems != nil && l > *n.maxItems) {
		return false
	}
	if n.items != nil {
		for _, e := range a {
			if !n.items.passes(e) {
				return false
			}
		}
	}
	return true
}
