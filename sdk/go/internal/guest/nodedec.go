package guest

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Node documents are decoded by hand rather than by encoding/json: in a Go guest,
// encoding/json's reflection and byte-at-a-time scanner cost about half a millisecond
// per document, which made the first call of an instance over 5,000 nodes take seconds
// (measured: 2.4 s of CPU). The decoder reads exactly the members of abi.Node and skips
// the others as encoding/json would; anything it is not sure to read the same way
// (escapes, non-ASCII text, members spelled in another case, wrong types) makes it give
// up, and the caller then uses encoding/json, so for valid JSON the result is always
// what encoding/json gives (the host only sends valid JSON).

var errFallback = errors.New("use encoding/json")

// interner shares the strings that repeat across nodes (label keys, zone names,
// quantities, condition types) so a node table of thousands of nodes holds few copies
// and the garbage collector has fewer objects to scan.
type interner struct{ m map[string]string }

// maxInterned bounds the interner so unique strings (node names, uids) cannot grow it
// without limit; past it, strings are simply allocated.
const maxInterned = 8192

func (in *interner) str(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= 64 && len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// reader walks one JSON document.
type reader struct {
	b  []byte
	i  int
	in *interner
}

func (r *reader) space() {
	for r.i < len(r.b) && isSpace(r.b[r.i]) {
		r.i++
	}
}

// next returns the next non-space byte without consuming it (0 at the end).
func (r *reader) next() byte {
	r.space()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

func (r *reader) expect(c byte) error {
	if r.next() != c {
		return errFallback
	}
	r.i++
	return nil
}

// rawString returns the bytes of a string without escapes or non-ASCII bytes; others
// are left to encoding/json.
func (r *reader) rawString() ([]byte, error) {
	if r.next() != '"' {
		return nil, errFallback
	}
	start := r.i + 1
	for j := start; j < len(r.b); j++ {
		c := r.b[j]
		switch {
		case c == '"':
			r.i = j + 1
			return r.b[start:j], nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, errFallback
		}
	}
	return nil, errFallback
}

func (r *reader) str() (string, error) {
	if r.isNull() {
		return "", nil
	}
	b, err := r.rawString()
	if err != nil {
		return "", err
	}
	return r.in.str(b), nil
}

// isNull consumes a null literal if there is one: encoding/json leaves the field as it
// is for null.
func (r *reader) isNull() bool {
	if r.next() == 'n' && r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

func (r *reader) boolean() (bool, error) {
	if r.isNull() {
		return false, nil
	}
	switch {
	case r.next() == 't' && r.i+4 <= len(r.b) && string(r.b[r.i:r.i+4]) == "true":
		r.i += 4
		return true, nil
	case r.next() == 'f' && r.i+5 <= len(r.b) && string(r.b[r.i:r.i+5]) == "false":
		r.i += 5
		return false, nil
	}
	return false, errFallback
}

func (r *reader) skip() error {
	end, err := skipValue(r.b, r.i)
	if err != nil {
		return errFallback
	}
	r.i = end
	return nil
}

// object calls member for each member of an object (null is an empty object).
func (r *reader) object(member func(key []byte) error) error {
	if r.isNull() {
		return nil
	}
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.next() == '}' {
		r.i++
		return nil
	}
	for {
		key, err := r.rawString()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch r.next() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return errFallback
		}
	}
}

// array calls elem for each element of an array (null is no array).
func (r *reader) array(elem func() error) error {
	if r.isNull() {
		return nil
	}
	if err := r.expect('['); err != nil {
		return err
	}
	if r.next() == ']' {
		r.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch r.next() {
		case ',':
			r.i++
		case ']':
			r.i++
			return nil
		default:
			return errFallback
		}
	}
}

// unknown skips a member that is not one of names; a member whose name differs from
// one of them only in case is one encoding/json would read, so it gives up.
func (r *reader) unknown(key []byte, names ...string) error {
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return errFallback
		}
	}
	return r.skip()
}

// stringMap reads a map of strings into m (allocated on first member, as encoding/json
// does; an existing map is added to).
func (r *reader) stringMap(m *map[string]string) error {
	if r.isNull() {
		*m = nil
		return nil
	}
	if r.next() != '{' {
		return errFallback
	}
	if *m == nil {
		*m = map[string]string{}
	}
	return r.object(func(key []byte) error {
		v, err := r.str()
		if err != nil {
			return err
		}
		(*m)[r.in.str(key)] = v
		return nil
	})
}

func (r *reader) meta(m *abi.ObjectMeta) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "name":
			m.Name, err = r.str()
		case "namespace":
			m.Namespace, err = r.str()
		case "uid":
			m.UID, err = r.str()
		case "resourceVersion":
			m.ResourceVersion, err = r.str()
		case "labels":
			err = r.stringMap(&m.Labels)
		case "annotations":
			err = r.stringMap(&m.Annotations)
		default:
			err = r.unknown(key, "name", "namespace", "uid", "resourceVersion", "labels", "annotations")
		}
		return err
	})
}

func (r *reader) spec(s *abi.NodeSpec) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "unschedulable":
			s.Unschedulable, err = r.boolean()
		case "taints":
			if r.isNull() {
				s.Taints = nil
				return nil
			}
			s.Taints = s.Taints[:0]
			if s.Taints == nil {
				s.Taints = []abi.Taint{}
			}
			err = r.array(func() error {
				var t abi.Taint
				err := r.object(func(key []byte) (err error) {
					switch string(key) {
					case "key":
						t.Key, err = r.str()
					case "value":
						t.Value, err = r.str()
					case "effect":
						t.Effect, err = r.str()
					default:
						err = r.unknown(key, "key", "value", "effect")
					}
					return err
				})
				s.Taints = append(s.Taints, t)
				return err
			})
		default:
			err = r.unknown(key, "unschedulable", "taints")
		}
		return err
	})
}

func (r *reader) status(s *abi.NodeStatus) error {
	return r.object(func(key []byte) (err error) {
		switch string(key) {
		case "capacity":
			err = r.stringMap(&s.Capacity)
		case "allocatable":
			err = r.stringMap(&s.Allocatable)
		case "conditions":
			if r.isNull() {
				s.Conditions = nil
				return nil
			}
			s.Conditions = s.Conditions[:0]
			if s.Conditions == nil {
				s.Conditions = []abi.NodeCondition{}
			}
			err = r.array(func() error {
				var c abi.NodeCondition
				err := r.object(func(key []byte) (err error) {
					switch string(key) {
					case "type":
						c.Type, err = r.str()
					case "status":
						c.Status, err = r.str()
					case "reason":
						c.Reason, err = r.str()
					default:
						err = r.unknown(key, "type", "status", "reason")
					}
					return err
				})
				s.Conditions = append(s.Conditions, c)
				return err
			})
		default:
			err = r.unknown(key, "capacity", "allocatable", "conditions")
		}
		return err
	})
}

// decodeNode decodes one node document (compact or full) as encoding/json would.
func decodeNode(b []byte, in *interner) (*abi.Node, error) {
	n := new(abi.Node)
	r := reader{b: b, in: in}
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "metadata":
			return r.meta(&n.Metadata)
		case "spec":
			return r.spec(&n.Spec)
		case "status":
			return r.status(&n.Status)
		}
		return r.unknown(key, "metadata", "spec", "status")
	})
	if err == nil {
		r.space()
		if r.i != len(b) {
			err = errFallback
		}
	}
	if err != nil {
		n = new(abi.Node)
		if err := json.Unmarshal(b, n); err != nil {
			return nil, err
		}
	}
	return n, nil
}
