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
	var exact bool
	return appendValue(dst, v, 0, &exact)
}

// AppendExact is Append, and also reports whether decoding the bytes gives v back
// exactly, as sigs.k8s.io/json's decoding into unstructured content reads them: only
// when v holds nothing but nulls, booleans, int64s, strings of valid UTF-8 and non-nil
// maps (with keys of valid UTF-8) and slices. A float64 (read back as an int64 when
// integral), an int or int32 (read back as int64), a nil map or slice (read back as a
// null) and invalid UTF-8 (read back as U+FFFD) make it false. A writer of stored bytes
// that keeps v as what was stored can then skip a walk that would turn v into that.
func AppendExact(dst []byte, v any) (b []byte, ok, exact bool) {
	exact = true
	b, ok = appendValue(dst, v, 0, &exact)
	return b, ok, ok && exact
}

// appendValue writes v; it clears *exact when decoding what it writes would not give v
// back exactly (see AppendExact).
func appendValue(dst []byte, v any, depth int, exact *bool) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return appendString(dst, v, exact), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case int:
		*exact = false
		return strconv.AppendInt(dst, int64(v), 10), true
	case int32:
		*exact = false
		return strconv.AppendInt(dst, int64(v), 10), true
	case float64:
		*exact = false
		return appendFloat(dst, v)
	case map[string]any:
		if v == nil {
			*exact = false
			return append(dst, "null"...), true
		}
		if depth >= maxDepth {
			return dst, false
		}
		return appendMap(dst, v, depth+1, exact)
	case []any:
		if v == nil {
			*exact = false
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
			if dst, ok = appendValue(dst, e, depth+1, exact); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	default:
		return dst, false
	}
}

// appendMap writes m's entries in the order of their keys' bytes, as encoding/json does.
func appendMap(dst []byte, m map[string]any, depth int, exact *bool) ([]byte, bool) {
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
		dst = appendString(dst, k, exact)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k], depth, exact); !ok {
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
	var valid bool
	return appendString(dst, s, &valid)
}

// appendString is AppendString; it clears *valid when s is not valid UTF-8.
func appendString(dst []byte, s string, valid *bool) []byte {
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
			*valid = false
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
