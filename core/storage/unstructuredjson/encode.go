// Package unstructuredjson writes unstructured content (the maps, slices, strings,
// numbers and booleans JSON decoding gives) as JSON, byte for byte as encoding/json
// writes it, and reads it as sigs.k8s.io/json's strict decoding does, without
// reflection: custom objects are encoded for etcd and for every response and decoded
// from every write request, and reflecting over their nested maps (then compacting what
// MarshalJSON returned) costs several times the writing itself. Each direction declines
// what it cannot promise to do exactly as the library, and the caller uses the library.
package unstructuredjson

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxDepth is how deep content may nest before Append gives up: encoding/json starts
// checking for cycles there, which plain unstructured content never has, so deeper
// content is left to it.
const maxDepth = 1000

// Append appends v as json.Marshal writes it and reports true, or reports false having
// made no promise about dst's new bytes when v holds something it does not write exactly
// as encoding/json would (a type other than those of unstructured content, a NaN or an
// infinity, content nested deeper than encoding/json's cycle check): the caller encodes
// with encoding/json then.
func Append(dst []byte, v any) ([]byte, bool) {
	return appendValue(dst, v, 0)
}

func appendValue(dst []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return AppendString(dst, v), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case int:
		return strconv.AppendInt(dst, int64(v), 10), true
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), true
	case float64:
		return appendFloat(dst, v)
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxDepth {
			return dst, false
		}
		return appendMap(dst, v, depth+1)
	case []any:
		if v == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxDepth {
			return dst, false
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	default:
		return dst, false
	}
}

// appendMap writes m's entries in the order of their keys' bytes, as encoding/json does.
func appendMap(dst []byte, m map[string]any, depth int) ([]byte, bool) {
	var buf [32]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k], depth); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendFloat writes f as encoding/json writes a float64: like ES6, the shortest
// decimal form, in exponent form only below 1e-6 or from 1e21, with a one-digit negative
// exponent written without its leading zero.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

const hex = "0123456789abcdef"

// AppendString appends s quoted as encoding/json writes a string with HTML escaping on (its
// default): <, > and & as \u escapes, the short escapes for \b \f \n \r \t, other control
// characters as \u00XX, invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
