package wasm

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

// A Rego call spends most of its time in OPA's guest parsing the input JSON, and the
// request (the whole object, at input.request and input.review) is nearly all of it.
// `wasmplane plugin build --lang rego` records in the module which subtrees of input the
// policy may read (plugins/wasm/toolkit/regoinput, found with OPA's compiler); the host
// then writes the policy a request holding only those subtrees, byte for byte as they
// are in the request, so that every reference the policy makes has the value it had.
// A validate request the admission chain writes for such a policy is written with only
// those members in the first place (RequestForm), so the host neither writes nor reads
// the rest.

// Members is the part of a JSON document (an admission request) a module may read: for
// each key kept, either the whole member (a nil child) or, when the member is an object,
// the part of it kept. A nil *Members is the whole document.
type Members struct {
	keys []string
	kids []*Members
	// request and review, at the root, tell whether the policy reads input.request and
	// input.review: an input written as one JSON text (evalOnce) holds only those it
	// reads, so that the request is not parsed twice for a policy that reads it under
	// one name only.
	request, review bool
}

// regoInputRecord is the custom section's JSON (regoinput.Paths).
type regoInputRecord struct {
	Paths [][]string `json:"paths"`
	Whole string     `json:"whole"`
}

// readRegoInput returns the part of the request the module's record allows the policy to
// read, or nil for the whole request: a module without the record (built by `opa build`
// directly), or whose record says the whole input. A record that does not read is an
// error: the module is broken, and guessing could hide members the policy reads.
func readRegoInput(wasm []byte) (*Members, error) {
	payload, found, err := customSection(wasm, abi.RegoInputSection)
	if err != nil || !found {
		return nil, err
	}
	var rec regoInputRecord
	if err := json.Unmarshal(payload, &rec); err != nil {
		return nil, fmt.Errorf("custom section %s: %w", abi.RegoInputSection, err)
	}
	if rec.Whole != "" || rec.Paths == nil {
		return nil, nil
	}
	t := &Members{}
	for _, path := range rec.Paths {
		if len(path) == 0 {
			return nil, nil
		}
		// The request is the value of input.request and of input.review alike; the
		// other members of input (apiVersion, kind, parameters) are written whole.
		switch path[0] {
		case "request":
			t.request = true
		case "review":
			t.review = true
		default:
			continue
		}
		if len(path) == 1 {
			return nil, nil
		}
		t.add(path[1:])
	}
	return t, nil
}

// MembersOf returns the members at the paths given (each a list of keys from the
// document's root, none empty), each kept whole below its last key.
func MembersOf(paths ...[]string) *Members {
	t := &Members{}
	for _, path := range paths {
		if len(path) > 0 {
			t.add(path)
		}
	}
	return t
}

// add keeps the member at path whole.
func (t *Members) add(path []string) {
	for i, k := range t.keys {
		if k != path[0] {
			continue
		}
		switch {
		case t.kids[i] == nil: // kept whole already
		case len(path) == 1:
			t.kids[i] = nil
		default:
			t.kids[i].add(path[1:])
		}
		return
	}
	t.keys = append(t.keys, path[0])
	if len(path) == 1 {
		t.kids = append(t.kids, nil)
		return
	}
	kid := &Members{}
	kid.add(path[1:])
	t.kids = append(t.kids, kid)
}

// project appends to dst the object obj with only the members t keeps, each written as
// the request has it (duplicate keys included, in their order). A member t descends into
// that is not an object is kept whole: a policy's reference below it is undefined either
// way.
func (t *Members) project(dst []byte, obj jsonview.Value) []byte {
	dst = append(dst, '{')
	n := 0
	for k, v := range obj.Members() {
		i := t.index(k)
		if i < 0 {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, k.Raw()...)
		dst = append(dst, ':')
		if kid := t.kids[i]; kid != nil && v.Kind() == jsonview.Object {
			dst = kid.project(dst, v)
		} else {
			dst = append(dst, v.Raw()...)
		}
	}
	return append(dst, '}')
}

// Member tells whether t keeps the member name, and returns the part of it kept: nil
// for the whole member. A nil t keeps every member whole.
func (t *Members) Member(name string) (*Members, bool) {
	if t == nil {
		return nil, true
	}
	i := slices.Index(t.keys, name)
	if i < 0 {
		return nil, false
	}
	return t.kids[i], true
}

// Keeps tells whether t keeps any of the member name.
func (t *Members) Keeps(name string) bool {
	_, ok := t.Member(name)
	return ok
}

func (t *Members) index(k jsonview.Value) int {
	for i, key := range t.keys {
		if k.Is(key) {
			return i
		}
	}
	return -1
}

// customSection returns the payload of the module's first custom section of that name.
func customSection(wasm []byte, name string) ([]byte, bool, error) {
	if len(wasm) < 8 {
		return nil, false, fmt.Errorf("not a WebAssembly binary module")
	}
	r := &wreader{b: wasm, off: 8}
	for !r.eof() {
		id := r.byte()
		payload := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, false, fmt.Errorf("section %d: %w", id, r.err)
		}
		if id != secCustom {
			continue
		}
		pr := &wreader{b: payload}
		if pr.name() == name && pr.err == nil {
			return payload[pr.off:], true, nil
		}
	}
	return nil, false, nil
}

// metadataSuffices tells whether the object metadata document (ABI §7.3,
// AppendObjectMetadata) has, at every member t keeps of a request's object and
// oldObject, the JSON the whole object has there, so that a policy given the projection
// of either reads the same values: the object's apiVersion and kind, and of its metadata
// the name, generateName, namespace, uid, labels and annotations, whole or below. The
// whole object is encoded with encoding/json's reflection (a Pod's compact document by
// plain code, but still member by member), cold when a request comes; the metadata
// document is a few members whatever the kind: for a policy about names, labels or
// annotations, most of what is left of a call once OPA parses only those.
func (t *Members) metadataSuffices() bool {
	for i, k := range t.keys {
		if k != "object" && k != "oldObject" {
			continue
		}
		obj := t.kids[i]
		if obj == nil {
			return false
		}
		for j, ok := range obj.keys {
			switch ok {
			case "apiVersion", "kind": // strings, whatever is asked below them
				continue
			case "metadata":
			default:
				return false
			}
			meta := obj.kids[j]
			if meta == nil {
				return false
			}
			kept := objectMetadataMembers()
			for _, mk := range meta.keys {
				if !slices.Contains(kept[:], mk) {
					return false
				}
			}
		}
	}
	return true
}
