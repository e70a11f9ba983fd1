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
// the caller decodes then.
func copyWritten(obj, out runtime.Object) bool {
	in, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	dst, ok := out.(*unstructured.Unstructured)
	if !ok {
		return false
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
