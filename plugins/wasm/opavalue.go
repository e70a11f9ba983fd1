package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Some builtins tell a set from an array (object.subset) or answer a set
// (net.cidr_expand, graph.reachable_paths): their operands cross in the text
// opa_value_dump writes and their results in the text opa_value_parse reads, Rego's value
// syntax, which is JSON with sets ({a, b}, and set() when empty) and keys of any type.
// The other builtins cross as JSON, in which a set becomes an array.

// opaSet is a Rego set: its elements are distinct (by regoKey).
type opaSet []any

// opaValueFunc computes a builtin from operands decoded from Rego's value syntax: nil,
// bool, json.Number, string, []any, map[string]any and opaSet. Its result may hold sets.
type opaValueFunc func(ev *opaEval, args []any) (any, error)

// parseRegoValue reads one value in Rego's value syntax. Objects must have string keys.
func parseRegoValue(text []byte) (any, error) {
	p := &regoParser{s: text}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("rego value: unexpected %q at %d", p.s[p.i], p.i)
	}
	return v, nil
}

type regoParser struct {
	s []byte
	i int
}

func (p *regoParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *regoParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *regoParser) expect(c byte) error {
	if p.peek() != c {
		return fmt.Errorf("rego value: expected %q at %d", c, p.i)
	}
	p.i++
	return nil
}

func (p *regoParser) value() (any, error) {
	switch c := p.peek(); {
	case c == '[':
		p.i++
		out := []any{}
		if p.peek() == ']' {
			p.i++
			return out, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			if p.peek() == ',' {
				p.i++
				continue
			}
			return out, p.expect(']')
		}
	case c == '{':
		p.i++
		if p.peek() == '}' {
			p.i++
			return map[string]any{}, nil
		}
		first, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.peek() == ':' {
			return p.object(first)
		}
		set := opaSet{first}
		for p.peek() == ',' {
			p.i++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			set = set.add(v)
		}
		return set, p.expect('}')
	case c == '"':
		start := p.i
		p.i++
		for p.i < len(p.s) && p.s[p.i] != '"' {
			if p.s[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		p.i++
		if p.i > len(p.s) {
			return nil, errors.New("rego value: unterminated string")
		}
		var s string
		if err := json.Unmarshal(p.s[start:p.i], &s); err != nil {
			return nil, fmt.Errorf("rego value: %w", err)
		}
		return s, nil
	case bytes.HasPrefix(p.s[p.i:], []byte("set()")):
		p.i += len("set()")
		return opaSet{}, nil
	case bytes.HasPrefix(p.s[p.i:], []byte("true")):
		p.i += 4
		return true, nil
	case bytes.HasPrefix(p.s[p.i:], []byte("false")):
		p.i += 5
		return false, nil
	case bytes.HasPrefix(p.s[p.i:], []byte("null")):
		p.i += 4
		return nil, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.s) && strings.IndexByte("+-.eE0123456789", p.s[p.i]) >= 0 {
			p.i++
		}
		n := json.Number(p.s[start:p.i])
		if _, err := n.Float64(); err != nil {
			return nil, fmt.Errorf("rego value: number %q: %w", n, err)
		}
		return n, nil
	default:
		return nil, fmt.Errorf("rego value: unexpected %q at %d", c, p.i)
	}
}

func (p *regoParser) object(firstKey any) (any, error) {
	out := map[string]any{}
	key := firstKey
	for {
		k, ok := key.(string)
		if !ok {
			return nil, fmt.Errorf("rego value: object key %s is not a string", regoKey(key))
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out[k] = v
		if p.peek() != ',' {
			return out, p.expect('}')
		}
		p.i++
		if key, err = p.value(); err != nil {
			return nil, err
		}
	}
}

// add returns s with v, unless s holds it already.
func (s opaSet) add(v any) opaSet {
	if s.contains(v) {
		return s
	}
	return append(s, v)
}

func (s opaSet) contains(v any) bool {
	k := regoKey(v)
	return slices.ContainsFunc(s, func(e any) bool { return regoKey(e) == k })
}

// regoEqual is Rego's equality: numbers by value, sets and objects regardless of order.
func regoEqual(a, b any) bool { return regoKey(a) == regoKey(b) }

// regoKey is a canonical text of v: equal values have equal keys.
func regoKey(v any) string {
	var b strings.Builder
	writeRego(&b, v, true)
	return b.String()
}

// regoText writes v in Rego's value syntax, for opa_value_parse.
func regoText(v any) string {
	var b strings.Builder
	writeRego(&b, v, false)
	return b.String()
}

func writeRego(b *strings.Builder, v any, canonical bool) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok && canonical {
			b.WriteString(r.RatString())
		} else {
			b.WriteString(string(v))
		}
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case string:
		js, _ := json.Marshal(v)
		b.Write(js)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeRego(b, e, canonical)
		}
		b.WriteByte(']')
	case []string:
		writeRego(b, toAnySlice(v), canonical)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeRego(b, k, canonical)
			b.WriteByte(':')
			writeRego(b, v[k], canonical)
		}
		b.WriteByte('}')
	case opaSet:
		if len(v) == 0 {
			b.WriteString("set()")
			return
		}
		elems := make([]string, len(v))
		for i, e := range v {
			var eb strings.Builder
			writeRego(&eb, e, canonical)
			elems[i] = eb.String()
		}
		if canonical {
			slices.Sort(elems)
		}
		b.WriteByte('{')
		b.WriteString(strings.Join(elems, ","))
		b.WriteByte('}')
	default:
		// Results built by the builtins only hold the types above; anything else is
		// written as its JSON.
		js, err := json.Marshal(v)
		if err != nil {
			b.WriteString("null")
			return
		}
		b.Write(js)
	}
}

func toAnySlice[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}
