package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// TestJSONReaders checks the C, Rust and AssemblyScript SDKs' JSON readers, which skip what a plugin does
// not look at by scanning the request's text a word at a time, against documents whose
// every value's text is known: a probe plugin (sdk/testdata) follows a path of member
// names and element indexes and answers the text it found, and its decoded string.
// The documents are random — strings with quotes, backslashes, brackets and escapes at
// every offset of a word, white space between tokens, escaped member names — and a few
// written by hand.
func TestJSONReaders(t *testing.T) {
	probes := []struct {
		lang  string
		build func(testing.TB) []byte
	}{
		{"c", func(tb testing.TB) []byte { return wasmtest.CFile(tb, "sdk/testdata/probe.c") }},
		{"rust", func(tb testing.TB) []byte { return wasmtest.RustFile(tb, "probe", "sdk/testdata/probe.rs") }},
		{"assemblyscript", func(tb testing.TB) []byte { return wasmtest.AssemblyScriptFile(tb, "sdk/testdata/probe.ts") }},
	}
	cases := handCases()
	rng := rand.New(rand.NewPCG(7, 11))
	for range 3000 {
		doc := genValue(rng, 0)
		path := genPath(rng, doc)
		cases = append(cases, readerCase{doc: doc.raw, path: path, want: follow(doc, path)})
	}
	for _, p := range probes {
		t.Run(p.lang, func(t *testing.T) {
			probe := loadProbe(t, p.build(t))
			for _, c := range cases {
				path, err := json.Marshal(c.path)
				if err != nil {
					t.Fatal(err)
				}
				req := `{"doc":` + c.doc + `,"path":` + string(path) + `}`
				out, err := probe.Call(context.Background(), "validate", []byte(req))
				if err != nil {
					t.Fatalf("%s: %v", req, err)
				}
				var got found
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("%s: answer %s: %v", req, out, err)
				}
				if want := c.want; got != *want {
					t.Fatalf("%s:\ngot  %+v\nwant %+v", req, got, *want)
				}
			}
		})
	}
}

// found is a probe's answer.
type found struct {
	Raw     string `json:"raw"`
	Str     string `json:"str"`
	Missing bool   `json:"missing"`
}

type readerCase struct {
	doc  string
	path []any // string member names and int element indexes
	want *found
}

func handCases() []readerCase {
	val := func(raw string) *found { return &found{Raw: raw} }
	str := func(raw, s string) *found { return &found{Raw: raw, Str: s} }
	none := &found{Missing: true}
	return []readerCase{
		{`{"a":1,"a":2}`, []any{"a"}, val("1")},                      // the first of repeated members
		{`{"\u0061":true}`, []any{"a"}, val("true")},                 // an escaped name
		{`{"a\"b":"x\\\"y"}`, []any{`a"b`}, str(`"x\\\"y"`, `x\"y`)}, // escaped quotes and backslashes
		{`{"ab":1,"a":2,"abc":3}`, []any{"a"}, val("2")},             // names that share a prefix
		{`{"a\\":1,"a":2}`, []any{`a\`}, val("1")},                   // a name ending in a backslash
		{` { "k" : [ 1 , { "x" : "]}\"[{" } ] } `, []any{"k", 1, "x"}, str(`"]}\"[{"`, `]}"[{`)},
		{`{"s":"0123456\"89abcdef\\"}`, []any{"s"}, str(`"0123456\"89abcdef\\"`, `0123456"89abcdef\`)},
		{`{"a":{"b":[]}}`, []any{"a", "b", 0}, none},
		{`[1,[2,3],"x"]`, []any{1, 1}, val("3")},
		{`[1,2]`, []any{"a"}, none},
		{`{"a":1}`, []any{0}, none},
		{`{"a":"1"}`, []any{"a", "b"}, none},
		{`{"a":{}}`, []any{"a"}, val("{}")},
		{`{"a":-1.5e3,"b":null}`, []any{"b"}, val("null")},
		{`{"é":"\u00e9\/"}`, []any{"é"}, str(`"\u00e9\/"`, "é/")},
	}
}

// node is a generated JSON value and its exact text.
type node struct {
	raw     string
	str     *string // decoded, for a string
	names   []string
	members []*node // objects: members[i] is named names[i]; arrays: the elements
	array   bool
}

func genValue(rng *rand.Rand, depth int) *node {
	k := rng.IntN(10)
	if depth >= 4 {
		k = rng.IntN(5)
	}
	switch {
	case k < 3:
		s, raw := genString(rng)
		return &node{raw: raw, str: &s}
	case k < 5:
		return &node{raw: []string{"0", "-12", "3.5e2", "true", "false", "null", "123456789012"}[rng.IntN(7)]}
	case k < 7:
		n := &node{array: true}
		var b strings.Builder
		b.WriteString("[")
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(ws(rng) + ",")
			}
			e := genValue(rng, depth+1)
			n.members = append(n.members, e)
			b.WriteString(ws(rng) + e.raw + ws(rng))
		}
		b.WriteString("]")
		n.raw = b.String()
		return n
	default:
		n := &node{}
		var b strings.Builder
		b.WriteString("{")
		seen := map[string]bool{}
		for range rng.IntN(6) {
			name, raw := genString(rng)
			if seen[name] {
				continue
			}
			seen[name] = true
			if len(n.names) > 0 {
				b.WriteString(",")
			}
			e := genValue(rng, depth+1)
			n.names, n.members = append(n.names, name), append(n.members, e)
			b.WriteString(ws(rng) + raw + ws(rng) + ":" + ws(rng) + e.raw + ws(rng))
		}
		b.WriteString("}")
		n.raw = b.String()
		return n
	}
}

// ws is white space between tokens, mostly none, as the host writes requests.
func ws(rng *rand.Rand) string {
	if rng.IntN(4) > 0 {
		return ""
	}
	return []string{" ", "\n", "\t ", "\r\n  "}[rng.IntN(4)]
}

// genString returns a string of 0–24 characters likely to trip a scanner, and its JSON
// text with escapes of every kind.
func genString(rng *rand.Rand) (string, string) {
	alphabet := []rune(`ab"\{}[],: /é日` + "\n\t")
	var s, raw strings.Builder
	raw.WriteByte('"')
	for range rng.IntN(25) {
		r := alphabet[rng.IntN(len(alphabet))]
		s.WriteRune(r)
		switch {
		case r == '"' || r == '\\':
			raw.WriteString(`\` + string(r))
		case r == '\n':
			raw.WriteString([]string{`\n`, `\u000a`}[rng.IntN(2)])
		case r == '\t':
			raw.WriteString([]string{`\t`, `\u0009`}[rng.IntN(2)])
		case r == '/' && rng.IntN(2) == 0:
			raw.WriteString(`\/`)
		case rng.IntN(6) == 0:
			raw.WriteString(fmt.Sprintf(`\u%04x`, r))
		default:
			raw.WriteRune(r)
		}
	}
	raw.WriteByte('"')
	return s.String(), raw.String()
}

// genPath walks down doc, now and then stopping or stepping to a member or element that
// is not there.
func genPath(rng *rand.Rand, doc *node) []any {
	path := []any{}
	for n := doc; n != nil && rng.IntN(5) > 0; {
		switch {
		case n.array:
			i := rng.IntN(len(n.members) + 1)
			path = append(path, i)
			if i == len(n.members) {
				return path
			}
			n = n.members[i]
		case n.names != nil || strings.HasPrefix(n.raw, "{"):
			if len(n.names) == 0 || rng.IntN(8) == 0 {
				s, _ := genString(rng)
				return append(path, s+"?")
			}
			i := rng.IntN(len(n.names))
			path = append(path, n.names[i])
			n = n.members[i]
		default:
			return append(path, []any{"x", 0}[rng.IntN(2)])
		}
	}
	return path
}

// follow is what a reader must find at path in doc.
func follow(doc *node, path []any) *found {
	n := doc
	for _, step := range path {
		var next *node
		switch s := step.(type) {
		case int:
			if n.array && s < len(n.members) {
				next = n.members[s]
			}
		case string:
			if !n.array {
				for i, name := range n.names {
					if name == s {
						next = n.members[i]
						break
					}
				}
			}
		}
		if next == nil {
			return &found{Missing: true}
		}
		n = next
	}
	f := &found{Raw: n.raw}
	if n.str != nil {
		f.Str = *n.str
	}
	return f
}

func loadProbe(t *testing.T, module []byte) *wasm.Plugin {
	t.Helper()
	ctx := context.Background()
	r, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(ctx) })
	cm, err := r.Compile(ctx, module, wasm.Digest(module))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Close(ctx) })
	p, err := r.Load(ctx, cm, wasm.PluginConfig{Name: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	return p
}

// TestMain removes the builds wasmtest made.
func TestMain(m *testing.M) { wasmtest.Main(m) }
