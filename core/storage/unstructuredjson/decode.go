package unstructuredjson

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxReadDepth is how deep Decode follows nesting before leaving the document to the
// library (whose own limit is far deeper).
const maxReadDepth = 1000

// Decode reads data, a JSON object, into unstructured content exactly as
// sigs.k8s.io/json's UnmarshalStrict does into a map[string]any (integers as int64 when
// they fit, other numbers as float64), and reports false when it cannot promise that:
// the document is not well formed, repeats a key in an object (a strict decoding error),
// holds a string with invalid UTF-8 or an escaped surrogate, a number float64 cannot
// hold, or nests deeper than it follows. Decoding request bodies of custom objects
// walked each body three times (checked, parsed for apiVersion and kind, parsed again
// into maps); the caller leaves every document Decode declines to the library.
func Decode(data []byte) (map[string]any, bool) {
	d := decoder{data: data}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return nil, false
	}
	m, ok := d.object(0)
	if !ok {
		return nil, false
	}
	d.space()
	return m, d.i == len(d.data)
}

type decoder struct {
	data []byte
	i    int
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		m, ok := d.object(depth + 1)
		return m, ok
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.string()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		return nil, false
	}
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.i < len(lit) || string(d.data[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// object reads an object starting at its '{'.
func (d *decoder) object(depth int) (map[string]any, bool) {
	if depth > maxReadDepth {
		return nil, false
	}
	d.i++
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return map[string]any{}, true
	}
	// The members are read first and the map made of their number: a map grown member
	// by member is rehashed (and its smaller tables left as garbage) on its way past
	// eight members. The first members of an object near the top are read into an array
	// on the stack (see onStack).
	if depth <= stackDepth {
		return d.onStack(depth)
	}
	return d.members(depth, nil)
}

// onStack reads an object's members as members does, the first objectMembers of them
// into an array on the stack: a frame each level of nesting down to stackDepth adds.
func (d *decoder) onStack(depth int) (map[string]any, bool) {
	var first [objectMembers]member
	return d.members(depth, first[:0])
}

// members reads the members of a non-empty object whose '{' has been read, appending
// them to read, and makes their map.
func (d *decoder) members(depth int, read []member) (map[string]any, bool) {
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		read = append(read, member{key: k, value: v})
		more, ok := d.after('}')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	m := make(map[string]any, len(read))
	for _, e := range read {
		m[e.key] = e.value
	}
	// A key read twice is a strict decoding error.
	return m, len(m) == len(read)
}

// objectMembers is how many members of an object at most stackDepth deep are read
// without allocating for them.
const (
	objectMembers = 24
	stackDepth    = 16
)

type member struct {
	key   string
	value any
}

// array reads an array starting at its '['.
func (d *decoder) array(depth int) (any, bool) {
	if depth > maxReadDepth {
		return nil, false
	}
	d.i++
	l := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return l, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		more, ok := d.after(']')
		if !ok {
			return nil, false
		}
		if !more {
			return l, true
		}
	}
}

// after reads what follows an object's member or an array's element: a comma (more
// follow) or the closing bracket.
func (d *decoder) after(closing byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.data) {
		return false, false
	}
	switch d.data[d.i] {
	case ',':
		d.i++
		return true, true
	case closing:
		d.i++
		return false, true
	default:
		return false, false
	}
}

// string reads a string starting at its '"'.
func (d *decoder) string() (string, bool) {
	d.i++
	start := d.i
	// The common case: no escapes, ASCII or valid UTF-8.
	for d.i < len(d.data) {
		c := d.data[d.i]
		if c == '"' {
			s := d.data[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		d.i++
	}
	var b strings.Builder
	b.Write(d.data[start:d.i])
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			s := b.String()
			if !utf8.ValidString(s) {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.data) {
			return "", false
		}
		d.i += 2
		switch e := d.data[d.i-1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if len(d.data)-d.i < 4 {
				return "", false
			}
			r, err := strconv.ParseUint(string(d.data[d.i:d.i+4]), 16, 32)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			d.i += 4
			b.WriteRune(rune(r))
		default:
			return "", false
		}
	}
	return "", false
}

// number reads a number as JSON's grammar has it, then converts it as
// sigs.k8s.io/json's PreserveInts does.
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '0':
		d.i++
	case c >= '1' && c <= '9':
		d.digits()
	default:
		return nil, false
	}
	fraction := false
	if d.i < len(d.data) && d.data[d.i] == '.' {
		fraction = true
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	exponent := false
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		exponent = true
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	if !fraction && !exponent {
		if n, ok := smallInt(d.data[start:d.i]); ok {
			return n, true
		}
	}
	s := string(d.data[start:d.i])
	if !fraction {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// digits reads one or more digits.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// smallInt is ParseInt of b, an integer as JSON writes it, when it has at most 18 digits
// (it cannot overflow then); false leaves the bigger ones to ParseInt.
func smallInt(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
