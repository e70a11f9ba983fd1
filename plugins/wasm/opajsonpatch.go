package wasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// opaJSONPatch is json.patch(object, patches): RFC 6902 operations applied in order
// (add, remove, replace, move, copy, test); paths are JSON pointers or arrays of
// segments, and a set's member is addressed by its value, as OPA addresses it.
func opaJSONPatch(_ *opaEval, args []any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("takes 2 arguments, got %d", len(args))
	}
	ops, ok := args[1].([]any)
	if !ok {
		return nil, errors.New("operand 2 must be array")
	}
	doc := deepCopyValue(args[0])
	for _, o := range ops {
		op, ok := o.(map[string]any)
		if !ok {
			return nil, errors.New("must be an array of JSON-Patch objects, but at least one element is not an object")
		}
		if _, ok := op["path"]; !ok {
			return nil, errors.New("missing required attribute 'path'")
		}
		name, ok := op["op"].(string)
		if !ok {
			return nil, errors.New("missing required attribute 'op', or not a string")
		}
		path, err := patchPath(op["path"])
		if err != nil {
			return nil, err
		}
		value, hasValue := op["value"]
		from := func() ([]any, error) {
			f, ok := op["from"]
			if !ok {
				return nil, errors.New("missing required attribute 'from'")
			}
			return patchPath(f)
		}
		switch name {
		case "add", "replace":
			if !hasValue {
				return nil, errors.New("missing required attribute 'value'")
			}
			if name == "replace" {
				if doc, err = patchDelete(doc, path); err != nil {
					return nil, err
				}
			}
			doc, err = patchInsert(doc, path, deepCopyValue(value))
		case "remove":
			doc, err = patchDelete(doc, path)
		case "move", "copy":
			var src []any
			if src, err = from(); err != nil {
				return nil, err
			}
			var chunk any
			if chunk, err = patchGet(doc, src); err != nil {
				return nil, err
			}
			chunk = deepCopyValue(chunk)
			if name == "move" {
				if doc, err = patchDelete(doc, src); err != nil {
					return nil, err
				}
			}
			doc, err = patchInsert(doc, path, chunk)
		case "test":
			if !hasValue {
				return nil, errors.New("missing required attribute 'value'")
			}
			var got any
			if got, err = patchGet(doc, path); err == nil && !regoEqual(got, value) {
				err = fmt.Errorf("value from EditTree != patch value: %s", regoText(got))
			}
		default:
			return nil, fmt.Errorf("unrecognized op: '%s'", name)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, ok := doc.(patchDeleted); ok {
		return nil, errors.New("the document was removed")
	}
	return doc, nil
}

// patchPath reads a JSON pointer ("" is the document; leading slashes are dropped, ~1
// and ~0 unescaped) or an array of segments.
func patchPath(p any) ([]any, error) {
	switch p := p.(type) {
	case string:
		if p == "" {
			return nil, nil
		}
		var out []any
		for _, part := range strings.Split(strings.TrimLeft(p, "/"), "/") {
			out = append(out, strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~"))
		}
		return out, nil
	case []any:
		return p, nil
	}
	return nil, errors.New("operand 2 must be one of {set, array} containing string paths or array of path segments")
}

// patchIndex reads an array index segment: a number, a string of digits without
// leading zeros, or "-" (the end).
func patchIndex(n int, seg any) (int, error) {
	switch s := seg.(type) {
	case json.Number:
		i, err := s.Int64()
		if err != nil {
			return 0, errors.New("invalid number type for indexing")
		}
		return int(i), nil
	case string:
		if s == "-" {
			return n, nil
		}
		i, err := json.Number(s).Int64()
		if err != nil {
			return 0, errors.New("invalid string for indexing")
		}
		if s != "0" && strings.HasPrefix(s, "0") {
			return 0, errors.New("leading zeros are not allowed in JSON paths")
		}
		return int(i), nil
	}
	return 0, errors.New("invalid type for indexing")
}

// patchDeleted is the document after "remove" at "".
type patchDeleted struct{}

// patchGet returns the value at path.
func patchGet(doc any, path []any) (any, error) {
	if _, ok := doc.(patchDeleted); ok {
		return nil, errors.New("deleted node encountered")
	}
	for _, seg := range path {
		switch d := doc.(type) {
		case map[string]any:
			k, ok := seg.(string)
			v, found := d[k]
			if !ok || !found {
				return nil, fmt.Errorf("path %s not found", regoText(path))
			}
			doc = v
		case []any:
			i, err := patchIndex(len(d), seg)
			if err != nil {
				return nil, err
			}
			if i < 0 || i >= len(d) {
				return nil, errors.New("index out of range")
			}
			doc = d[i]
		case opaSet:
			if !d.contains(seg) {
				return nil, fmt.Errorf("path %s not found", regoText(path))
			}
			doc = seg
		default:
			return nil, fmt.Errorf("path %s not found", regoText(path))
		}
	}
	return doc, nil
}

// patchInsert puts value at path (added to an object or set, inserted into an array)
// and returns the new document.
func patchInsert(doc any, path []any, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	parent, err := patchGet(doc, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	key := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			return nil, errors.New("object key must be a string")
		}
		p[k] = value
		return doc, nil
	case opaSet:
		if !regoEqual(key, value) {
			return nil, fmt.Errorf("set key %s does not equal value to be inserted %s", regoText(key), regoText(value))
		}
		return patchReplaceChild(doc, path[:len(path)-1], p.add(value))
	case []any:
		i, err := patchIndex(len(p), key)
		if err != nil {
			return nil, err
		}
		if i < 0 || i > len(p) {
			return nil, errors.New("index for array insertion out of bounds")
		}
		return patchReplaceChild(doc, path[:len(path)-1], slices.Insert(slices.Clone(p), i, value))
	}
	return nil, fmt.Errorf("expected composite type, found value: %s", regoText(parent))
}

// patchDelete removes what is at path and returns the new document.
func patchDelete(doc any, path []any) (any, error) {
	if _, err := patchGet(doc, path); err != nil {
		return nil, err
	}
	if len(path) == 0 {
		// Until something is added at "" again, there is no document.
		return patchDeleted{}, nil
	}
	parent, _ := patchGet(doc, path[:len(path)-1])
	key := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		delete(p, key.(string))
		return doc, nil
	case opaSet:
		k := regoKey(key)
		return patchReplaceChild(doc, path[:len(path)-1], slices.DeleteFunc(slices.Clone(p), func(e any) bool { return regoKey(e) == k }))
	case []any:
		i, _ := patchIndex(len(p), key)
		return patchReplaceChild(doc, path[:len(path)-1], slices.Delete(slices.Clone(p), i, i+1))
	}
	return nil, errors.New("cannot delete from a scalar")
}

// patchReplaceChild sets the array or set at path, which exists, to v (arrays and sets
// change by value, so their parent takes the new one).
func patchReplaceChild(doc any, path []any, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, _ := patchGet(doc, path[:len(path)-1])
	key := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[key.(string)] = v
	case []any:
		i, _ := patchIndex(len(p), key)
		p[i] = v
	case opaSet:
		// A set holding a composite member addressed by its value: the member changes.
		k := regoKey(key)
		for i, e := range p {
			if regoKey(e) == k {
				p[i] = v
			}
		}
	}
	return doc, nil
}

// deepCopyValue copies the maps, slices and sets of v.
func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	case opaSet:
		out := make(opaSet, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}
