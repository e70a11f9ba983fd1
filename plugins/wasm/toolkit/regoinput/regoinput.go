// Package regoinput finds what a Rego policy reads of its input, when the policy is built,
// and records it in the module. Most of a Rego call's time is OPA's guest parsing the
// input JSON (the whole AdmissionReview request, object included); a policy that reads an
// object's labels needs only those, and the host writes it an input holding only the
// subtrees the policy can reach (plugins/wasm/opainput.go).
//
// The analysis runs on the policy as OPA's own compiler leaves it (imports resolved,
// locals renamed, `some … in`, `every` and comprehensions rewritten), so that every way
// a Rego program can reach input is a reference rooted at the input document:
//
//   - a reference's longest constant prefix (the run of string keys after input, ending
//     at the first variable, wildcard, number or other non-string term) is kept whole:
//     `input.review.object.spec.containers[_].image` keeps every container;
//   - input or a prefix used as a value — passed to a function (walk, object.get,
//     json.marshal, …), assigned, compared, iterated — is a reference like any other, so
//     its subtree is kept whole as well;
//   - `with input as …` or `with input.x as …` anywhere, `input` as a whole value, a
//     policy the compiler refuses: the whole input, as a module without the record gets.
//
// Soundness rests on one property: the host removes members only where no reference
// could reach them. Every value a policy can observe (a member's presence, an object's
// keys, a count, an equality) is the value of some reference, whose constant prefix the
// record keeps whole.
package regoinput

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Paths is what a policy may read of its input.
type Paths struct {
	// Paths lists, below input, the subtrees the policy may read, each kept whole: no
	// path is a prefix of another, and they are sorted. Empty (not nil) for a policy
	// that reads nothing of input; nil with Whole.
	Paths [][]string `json:"paths"`
	// Whole is why the policy gets its whole input, when it does ("" otherwise).
	Whole string `json:"whole,omitempty"`
}

// String renders the paths as Rego references (input.review.object.metadata.labels, …),
// or "the whole input (<why>)".
func (p Paths) String() string {
	if p.Whole != "" {
		return "the whole input (" + p.Whole + ")"
	}
	if len(p.Paths) == 0 {
		return "nothing of input"
	}
	refs := make([]string, len(p.Paths))
	for i, path := range p.Paths {
		refs[i] = ast.NewTerm(append(ast.Ref{ast.InputRootDocument}, stringTerms(path)...)).String()
	}
	return strings.Join(refs, ", ")
}

func stringTerms(path []string) []*ast.Term {
	ts := make([]*ast.Term, len(path))
	for i, k := range path {
		ts[i] = ast.StringTerm(k)
	}
	return ts
}

// Analyze compiles the policy files (name → Rego source, parsed as `opa build` parses
// them: Rego v1) with OPA's compiler and returns the input paths they may read. A policy
// the compiler refuses gets the whole input (the build, which runs OPA itself, reports
// why); it is not an error here.
func Analyze(files map[string]string) Paths {
	modules := make(map[string]*ast.Module, len(files))
	for name, src := range files {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return Paths{Whole: "the policy does not parse: " + firstLine(err)}
		}
		modules[name] = m
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(true)
	c.Compile(modules)
	if c.Failed() {
		return Paths{Whole: "the policy does not compile: " + firstLine(c.Errors)}
	}
	a := &analysis{}
	names := make([]string, 0, len(c.Modules))
	for name := range c.Modules {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		// Rules only: an import (`import input.review.object as obj`) is resolved into the
		// references that use it, which are what counts.
		for _, r := range c.Modules[name].Rules {
			a.walk(r)
			if a.whole != "" {
				return Paths{Whole: a.whole}
			}
		}
	}
	return Paths{Paths: minimal(a.paths)}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// analysis collects the constant prefixes of the references to input.
type analysis struct {
	paths [][]string
	whole string
}

func (a *analysis) walk(x any) {
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if a.whole != "" {
			return true
		}
		switch x := x.(type) {
		case *ast.With:
			if isInput(x.Target) {
				a.whole = "the policy replaces input with `with " + x.Target.String() + " as …`"
				return true
			}
		case ast.Ref:
			if !x.HasPrefix(ast.InputRootRef) {
				return false
			}
			path := []string{}
			for _, t := range x[1:] {
				s, ok := t.Value.(ast.String)
				if !ok {
					break
				}
				path = append(path, string(s))
			}
			if len(path) == 0 {
				a.whole = "the policy reads " + x.String() + " as a whole"
				return true
			}
			a.paths = append(a.paths, path)
			// The terms after the root may hold references too (input.a[input.b]).
			for _, t := range x[1:] {
				vis.Walk(t)
			}
			return true
		case ast.Var:
			// Outside a reference: the input document as a value (after compilation, a
			// local is never named input).
			if x.Equal(ast.InputRootDocument.Value) {
				a.whole = "the policy reads input as a whole"
				return true
			}
		}
		return false
	})
	vis.Walk(x)
}

// isInput tells whether a with target is input or below it.
func isInput(t *ast.Term) bool {
	switch v := t.Value.(type) {
	case ast.Ref:
		return v.HasPrefix(ast.InputRootRef)
	case ast.Var:
		return v.Equal(ast.InputRootDocument.Value)
	}
	return false
}

// minimal sorts paths and drops those below another one (the other keeps their subtree)
// and duplicates.
func minimal(paths [][]string) [][]string {
	slices.SortFunc(paths, slices.Compare)
	out := [][]string{}
	for _, p := range paths {
		if n := len(out); n > 0 && hasPrefix(p, out[n-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func hasPrefix(p, prefix []string) bool {
	return len(p) >= len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}

// Section is the custom section recording p (abi.RegoInputSection): the JSON of p.
func Section(p Paths) []byte {
	b, _ := json.Marshal(p) // strings and lists of strings only
	return b
}

// Record appends the custom section recording p to a WebAssembly module. A module that
// has one already is refused: its record would be ambiguous.
func Record(wasm []byte, p Paths) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("regoinput: not a WebAssembly binary module")
	}
	if has, err := hasSection(wasm, abi.RegoInputSection); err != nil {
		return nil, fmt.Errorf("regoinput: %w", err)
	} else if has {
		return nil, fmt.Errorf("regoinput: the module has a %s section already", abi.RegoInputSection)
	}
	payload := binary.AppendUvarint(nil, uint64(len(abi.RegoInputSection)))
	payload = append(payload, abi.RegoInputSection...)
	payload = append(payload, Section(p)...)
	out := append(slices.Clip(wasm), 0) // custom section id
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...), nil
}

// hasSection tells whether the module has a custom section of that name.
func hasSection(wasm []byte, name string) (bool, error) {
	b := wasm[8:]
	for len(b) > 0 {
		id := b[0]
		size, n := binary.Uvarint(b[1:])
		if n <= 0 || uint64(len(b)-1-n) < size {
			return false, errors.New("a section runs past the end of the module")
		}
		body := b[1+n : 1+n+int(size)]
		b = b[1+n+int(size):]
		if id != 0 {
			continue
		}
		l, m := binary.Uvarint(body)
		if m <= 0 || uint64(len(body)-m) < l {
			return false, errors.New("a custom section's name runs past its end")
		}
		if string(body[m:m+int(l)]) == name {
			return true, nil
		}
	}
	return false, nil
}

// RecordFile analyses the policy files and records what they read in the module file,
// rewritten in place; it returns the paths recorded.
func RecordFile(module string, sources ...string) (Paths, error) {
	files := make(map[string]string, len(sources))
	for _, s := range sources {
		b, err := os.ReadFile(s)
		if err != nil {
			return Paths{}, fmt.Errorf("regoinput: %w", err)
		}
		files[s] = string(b)
	}
	p := Analyze(files)
	wasm, err := os.ReadFile(module)
	if err != nil {
		return Paths{}, fmt.Errorf("regoinput: %w", err)
	}
	if wasm, err = Record(wasm, p); err != nil {
		return Paths{}, err
	}
	if err := os.WriteFile(module, wasm, 0o644); err != nil {
		return Paths{}, fmt.Errorf("regoinput: %w", err)
	}
	return p, nil
}
