// Package jsonview reads JSON in place. A Value is the bytes of one JSON value; its
// methods find members, items and scalars by scanning those bytes, and decode only what
// a plugin asks for. A validating plugin that looks at a few fields of a request (an
// object's labels, its containers' images) reads them without building the request, the
// object or any map: in a WebAssembly guest that is most of a call's time, because every
// allocation, map and decoded field touches memory and runtime code that the API
// server's own work between two calls has evicted from the CPU's caches.
//
// Values alias the bytes they were made from. The Values a hook handler receives alias
// the request, which the host overwrites with the next one: use them, and Bytes, within
// the handler; String and the decoders copy what they return.
//
// Reading follows encoding/json where the two can differ: a string with escapes or
// invalid UTF-8 is decoded by encoding/json itself. Keys are matched exactly (not case-
// insensitively as encoding/json matches struct fields), and the first of duplicate keys
// is found; JSON from the host has no duplicates. The bytes are not validated: the host
// sends valid JSON; on anything else methods do not panic, and answer as for a missing
// value where they find the JSON broken.
//
// Built for WebAssembly (GOARCH=wasm, as plugins are), member lookups and the skipping of
// values run in hand-written WebAssembly (scan_wasm.s) that answers as the Go code does.
package jsonview

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"iter"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// Value is one JSON value read in place; the zero Value is a missing one.
//
// An object or array found by Get is open: raw starts at its bracket and runs to the end
// of the document, and its own end is found only if Raw or Decode asks for it. Reading a
// member of the object, or its items, stops at its closing bracket anyway, so a path such
// as At("object", "spec") does not first scan all of "object" to find where it ends: a
// plugin's call then reads each byte of the request about once instead of once per
// level of the path.
type Value struct {
	raw  []byte
	open bool
}

// Kind is the type of a JSON value.
type Kind uint8

// The kinds of Value; Missing is a member or item that is not there.
const (
	Missing Kind = iota
	Null
	Bool
	Number
	String
	Object
	Array
)

// Parse returns the Value of the JSON text b (spaces around it are ignored).
func Parse(b []byte) Value {
	i := skipSpace(b, 0)
	j := len(b)
	for j > i && isSpace(b[j-1]) {
		j--
	}
	if i >= j {
		return Value{}
	}
	return Value{raw: b[i:j]}
}

// Raw returns the value's JSON text, or nil for a missing value (or an object or array
// whose end is not in the document).
func (v Value) Raw() []byte {
	if !v.open {
		return v.raw
	}
	end, ok := skipValue(v.raw, 0)
	if !ok {
		return nil
	}
	return v.raw[:end]
}

// Exists tells whether the value is there (null is there).
func (v Value) Exists() bool { return len(v.raw) > 0 }

// Kind returns the value's type.
func (v Value) Kind() Kind {
	if len(v.raw) == 0 {
		return Missing
	}
	switch v.raw[0] {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	}
	return Number
}

// Get returns the member key of an object; a missing Value if v is not an object or has
// no such member.
func (v Value) Get(key string) Value {
	start, end := getMember(v.raw, key)
	switch {
	case start < 0 || end == -2:
		return Value{}
	case end < 0:
		return Value{raw: v.raw[start:], open: true}
	}
	return Value{raw: v.raw[start:end]}
}

// getMemberGo returns where the value of member key starts in the object at the start of
// b, or -1 if b is not an object or has no such member, and where the value ends: -1 for
// an object or an array (their ends are not looked for), -2 if the value does not end.
func getMemberGo(b []byte, key string) (start, end int) {
	start = findMemberGo(b, key)
	if start < 0 {
		return -1, -1
	}
	if c := b[start]; c == '{' || c == '[' {
		return start, -1
	}
	end, ok := skipValue(b, start)
	if !ok {
		return start, -2
	}
	return start, end
}

// findMemberGo returns where the value of member key starts in the object at the start of
// b, or -1 if b is not an object or has no such member. The members before it are
// skipped; the member's own value is not.
func findMemberGo(b []byte, key string) int {
	if len(b) == 0 || b[0] != '{' {
		return -1
	}
	i := skipSpace(b, 1)
	for i < len(b) && b[i] == '"' {
		end, ascii, ok := scanKey(b, i)
		if !ok {
			return -1
		}
		rawKey := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		start := skipSpace(b, i+1)
		if start >= len(b) {
			return -1
		}
		if ascii && sameBytes(rawKey, key) || !ascii && keyIs(rawKey, key) {
			return start
		}
		vend, ok := skipValue(b, start)
		if !ok {
			return -1
		}
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] != ',' {
			return -1
		}
		i = skipSpace(b, i+1)
	}
	return -1
}

// At follows a path of object members: v.At("metadata", "labels") is
// v.Get("metadata").Get("labels").
func (v Value) At(keys ...string) Value {
	for _, k := range keys {
		v = v.Get(k)
	}
	return v
}

// Has tells whether v is an object with a member key.
func (v Value) Has(key string) bool {
	start, _ := getMember(v.raw, key)
	return start >= 0
}

// Index returns item i of an array; a missing Value if v is not an array or is shorter.
func (v Value) Index(i int) Value {
	for item := range v.Items() {
		if i == 0 {
			return item
		}
		i--
	}
	return Value{}
}

// Len returns the number of items of an array or members of an object, else 0.
func (v Value) Len() int {
	n := 0
	switch v.Kind() {
	case Array:
		for range v.Items() {
			n++
		}
	case Object:
		for range v.Members() {
			n++
		}
	}
	return n
}

// Items iterates over the items of an array (nothing if v is not an array).
func (v Value) Items() iter.Seq[Value] {
	return func(yield func(Value) bool) {
		if len(v.raw) == 0 || v.raw[0] != '[' {
			return
		}
		b := v.raw
		i := skipSpace(b, 1)
		if i < len(b) && b[i] == ']' {
			return
		}
		for i < len(b) {
			end, ok := skipValue(b, i)
			if !ok || !yield(Value{raw: b[i:end]}) {
				return
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// Members iterates over the members of an object, each key as a String Value (nothing if
// v is not an object).
func (v Value) Members() iter.Seq2[Value, Value] {
	return func(yield func(Value, Value) bool) {
		if len(v.raw) == 0 || v.raw[0] != '{' {
			return
		}
		b := v.raw
		i := skipSpace(b, 1)
		for i < len(b) && b[i] == '"' {
			end, ok := skipString(b, i)
			if !ok {
				return
			}
			key := b[i:end]
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return
			}
			start := skipSpace(b, i+1)
			vend, ok := skipValue(b, start)
			if !ok || !yield(Value{raw: key}, Value{raw: b[start:vend]}) {
				return
			}
			i = skipSpace(b, vend)
			if i >= len(b) || b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// Is tells whether v is the string s, without decoding or copying it.
func (v Value) Is(s string) bool { return isString(v.raw, s) }

// isGo tells whether the JSON value q is the string s.
func isGo(q []byte, s string) bool {
	v := Value{raw: q}
	if len(v.raw) < 2 || v.raw[0] != '"' {
		return false
	}
	if body, ok := plain(v.raw); ok {
		return string(body) == s
	}
	return v.String() == s
}

// String returns the string v holds, decoded as encoding/json decodes it ("" if v is not
// a string). The result is a copy: it may be kept.
func (v Value) String() string {
	if len(v.raw) < 2 || v.raw[0] != '"' {
		return ""
	}
	if body, ok := plain(v.raw); ok {
		return string(body)
	}
	var s string
	if err := json.Unmarshal(v.raw, &s); err != nil {
		return ""
	}
	return s
}

// Bytes returns the string v holds, decoded as String does (nil if v is not a string).
// Unless the string has escapes or invalid UTF-8 it aliases v's bytes and must not be
// changed or kept past the handler.
func (v Value) Bytes() []byte {
	if len(v.raw) < 2 || v.raw[0] != '"' {
		return nil
	}
	if body, ok := plain(v.raw); ok {
		return body
	}
	return []byte(v.String())
}

// Bool returns the boolean v holds; ok is false if v is not a boolean.
func (v Value) Bool() (b, ok bool) {
	switch string(v.raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Int returns the integer v holds; ok is false if v is not a number that encoding/json
// would decode into an int64.
func (v Value) Int() (n int64, ok bool) {
	if v.Kind() != Number {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v.raw), 10, 64)
	return n, err == nil
}

// Float returns the number v holds; ok is false if v is not a number.
func (v Value) Float() (f float64, ok bool) {
	if v.Kind() != Number {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.raw), 64)
	return f, err == nil
}

// Decode decodes v into dst with encoding/json, for the parts of a request a plugin wants
// whole.
func (v Value) Decode(dst any) error {
	if len(v.raw) == 0 {
		return json.Unmarshal([]byte("null"), dst)
	}
	raw := v.Raw()
	if raw == nil {
		return json.Unmarshal(v.raw, dst) // the document is broken: let encoding/json say where
	}
	return json.Unmarshal(raw, dst)
}

// plain returns the body of the quoted string q when decoding it would give the same
// bytes: no escapes and valid UTF-8.
func plain(q []byte) ([]byte, bool) {
	body := q[1 : len(q)-1]
	var or byte
	for _, c := range body {
		if c == '\\' {
			return nil, false
		}
		or |= c
	}
	if or >= utf8.RuneSelf && !utf8.Valid(body) {
		return nil, false
	}
	return body, true
}

// keyIs tells whether a raw key (between its quotes) with escapes or non-ASCII bytes
// decodes to key.
func keyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw) == key
	}
	var s string
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	if err := json.Unmarshal(quoted, &s); err != nil {
		return false
	}
	return s == key
}

// sameBytes tells whether b holds the bytes of s. Keys are short: a loop here is cheaper
// in a WebAssembly guest than the runtime's memequal, which is two calls.
func sameBytes(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if b[i] != s[i] {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanKey returns the index after the string starting at b[i] == '"', and whether the
// string is plain ASCII without escapes (so that its bytes are its value).
func scanKey(b []byte, i int) (end int, ascii, ok bool) {
	var or byte
	for i++; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			return i + 1, or < utf8.RuneSelf, true
		}
		or |= c
		if c == '\\' {
			or |= utf8.RuneSelf
			i++
		}
	}
	return 0, false, false
}

// skipString returns the index after the string starting at b[i] == '"'. It reads eight
// bytes at a time, looking for a quote or a backslash in all eight at once: in a
// WebAssembly guest a loop over bytes, or a call to bytes.IndexByte per string, costs
// several times more.
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for j+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[j:])
		m := bytesEqual(w, '"') | bytesEqual(w, '\\')
		if m == 0 {
			j += 8
			continue
		}
		// The lowest marked byte is the first quote or backslash (a borrow can only
		// mark bytes after a real match).
		j += bits.TrailingZeros64(m) >> 3
		if b[j] == '"' {
			return j + 1, true
		}
		j += 2 // a backslash and the byte it escapes
	}
	for j < len(b) {
		switch b[j] {
		case '"':
			return j + 1, true
		case '\\':
			j += 2
		default:
			j++
		}
	}
	return 0, false
}

// bytesEqual marks, with its high bit, each byte of w that equals c; bytes after a marked
// one may be marked too.
func bytesEqual(w uint64, c byte) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := w ^ (ones * uint64(c))
	return (x - ones) &^ x & highs
}

// structural marks the bytes skipValue stops at inside an object or array.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// skipValueGo returns the index after the JSON value that starts at b[i].
func skipValueGo(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
			for i < len(b) && !structural[b[i]] {
				i++
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
		j++
	}
	return j, j > i
}
