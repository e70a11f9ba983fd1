package storage

import (
	"math"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// copyWritten fills out with what decoding the bytes obj was just stored as would give,
// without decoding them: for an unstructured object, a copy of its content with numbers
// as JSON turns them (an integral float64 is written without a fraction and read back
// as an int64). It reports false, having changed nothing, when it cannot tell that
// exactly (a value of a type JSON decoding never produces, a string that is not UTF-8):
// the caller decodes then. When out is obj itself (a caller done with obj once it is
// stored) the content is turned into that in place, with no copy; declining may then
// have turned some numbers already, which decoding into out replaces anyway.
func copyWritten(obj, out runtime.Object) bool {
	in, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	dst, ok := out.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	if in == dst {
		return in.Object != nil && jsonInPlace(in.Object)
	}
	c, ok := jsonCopy(in.Object)
	if !ok {
		return false
	}
	m, _ := c.(map[string]any)
	dst.Object = m
	return true
}

// jsonCopy copies v as a JSON encoding and decoding into unstructured content would.
func jsonCopy(v any) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		if v == nil {
			return nil, true
		}
		m := make(map[string]any, len(v))
		for k, e := range v {
			if !utf8.ValidString(k) {
				return nil, false
			}
			c, ok := jsonCopy(e)
			if !ok {
				return nil, false
			}
			m[k] = c
		}
		return m, true
	case []any:
		if v == nil {
			return nil, true
		}
		l := make([]any, len(v))
		for i, e := range v {
			c, ok := jsonCopy(e)
			if !ok {
				return nil, false
			}
			l[i] = c
		}
		return l, true
	case string:
		return v, utf8.ValidString(v)
	case bool, int64:
		return v, true
	case float64:
		return jsonNumber(v)
	default:
		return nil, false
	}
}

// jsonInPlace turns the content of m into what a JSON encoding and decoding would give,
// as jsonCopy does but in place: integral numbers become int64, empty (nil) maps and
// lists become nulls.
func jsonInPlace(m map[string]any) bool {
	if len(m) == 0 {
		// Ranging over a map costs even when it is empty, and field sets in
		// managedFields are mostly empty maps.
		return true
	}
	for k, e := range m {
		if !utf8.ValidString(k) {
			return false
		}
		n, changed, ok := jsonValueInPlace(e)
		if !ok {
			return false
		}
		if changed {
			m[k] = n
		}
	}
	return true
}

// jsonValueInPlace is jsonInPlace for one value: whether v must be replaced in its
// container (and by what), and whether v is content JSON gives back exactly.
func jsonValueInPlace(v any) (replacement any, changed, ok bool) {
	switch v := v.(type) {
	case nil, bool, int64:
		return nil, false, true
	case map[string]any:
		if v == nil {
			return nil, true, true
		}
		return nil, false, jsonInPlace(v)
	case []any:
		if v == nil {
			return nil, true, true
		}
		for i, e := range v {
			n, changed, ok := jsonValueInPlace(e)
			if !ok {
				return nil, false, false
			}
			if changed {
				v[i] = n
			}
		}
		return nil, false, true
	case string:
		return nil, false, utf8.ValidString(v)
	case float64:
		n, ok := jsonNumber(v)
		return n, ok, ok
	default:
		return nil, false, false
	}
}

// jsonNumber is f as read back after encoding/json wrote it: an integral value is
// written without a fraction and read as an int64. Integral values too large for a
// float64 to hold every integer near them are left to decoding.
func jsonNumber(f float64) (any, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	if f != math.Trunc(f) {
		return f, true
	}
	if math.Abs(f) >= 1<<53 {
		return nil, false
	}
	return int64(f), true
}

// gvkExact reports whether the apiVersion and kind of obj, a custom object, are as
// decoding gives them back (absent, or strings of valid UTF-8). The storage codec writes
// the scheme's kind and puts the object's own back afterwards, so what it found exact
// while writing says nothing about these two.
func gvkExact(obj runtime.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return false
	}
	for _, k := range [...]string{"apiVersion", "kind"} {
		v, found := u.Object[k]
		if !found {
			continue
		}
		if s, ok := v.(string); !ok || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
