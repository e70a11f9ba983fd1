package unstructuredjson

import "bytes"

// InsertMember returns doc with the string member key: value added to the object that is
// doc's top-level member named object, where Append would have written it: before the
// first member whose key sorts after key. doc must be as Append writes content (compact,
// map keys sorted, a newline after it allowed); the result is then exactly Append of the
// content with the member added. It reports false, and returns nothing, when doc is not
// so written, has no such object, or the object holds key already or a key with an
// escape in it (whose order it does not work out): the caller encodes the content
// itself then.
//
// A created object is stored without its resourceVersion (the revision is its version)
// and answered with it: its answer is its stored bytes with that member inserted.
func InsertMember(doc []byte, object, key, value string) ([]byte, bool) {
	if len(doc) < 2 || doc[0] != '{' {
		return nil, false
	}
	// The top-level members, up to the object's opening brace.
	i, found := 1, false
	for i < len(doc) && doc[i] != '}' {
		k, next, ok := memberKey(doc, i)
		if !ok {
			return nil, false
		}
		if k == object {
			if next >= len(doc) || doc[next] != '{' {
				return nil, false
			}
			i, found = next+1, true
			break
		}
		if i, ok = skipValue(doc, next); !ok {
			return nil, false
		}
		if i < len(doc) && doc[i] == ',' {
			i++
		}
	}
	if !found {
		return nil, false
	}
	// The object's members, up to the first whose key sorts after key.
	at := i
	for at < len(doc) && doc[at] != '}' {
		k, next, ok := memberKey(doc, at)
		if !ok || k == key {
			return nil, false
		}
		if k > key {
			break
		}
		end, ok := skipValue(doc, next)
		if !ok || end >= len(doc) {
			return nil, false
		}
		if doc[end] == ',' {
			end++
		}
		at = end
	}
	if at >= len(doc) {
		return nil, false
	}
	member := make([]byte, 0, len(key)+len(value)+8)
	member = AppendString(member, key)
	member = append(member, ':')
	member = AppendString(member, value)
	out := make([]byte, 0, len(doc)+len(member)+1)
	out = append(out, doc[:at]...)
	switch {
	case doc[at] != '}':
		// Before a member whose key sorts after key.
		out = append(append(out, member...), ',')
	case doc[at-1] == '{':
		// The object was empty.
		out = append(out, member...)
	default:
		// After the object's last member.
		out = append(append(out, ','), member...)
	}
	return append(out, doc[at:]...), true
}

// memberKey reads the key of the member at i ("key":) and returns it with the index of
// its value; keys with escapes are declined.
func memberKey(doc []byte, i int) (string, int, bool) {
	if i >= len(doc) || doc[i] != '"' {
		return "", 0, false
	}
	end := bytes.IndexByte(doc[i+1:], '"')
	if end < 0 {
		return "", 0, false
	}
	k := doc[i+1 : i+1+end]
	if bytes.IndexByte(k, '\\') >= 0 {
		return "", 0, false
	}
	next := i + 1 + end + 1
	if next >= len(doc) || doc[next] != ':' {
		return "", 0, false
	}
	return string(k), next + 1, true
}

// skipValue returns the index just after the value starting at i.
func skipValue(doc []byte, i int) (int, bool) {
	depth := 0
	for i < len(doc) {
		switch c := doc[i]; c {
		case '"':
			i++
			for i < len(doc) && doc[i] != '"' {
				if doc[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(doc) {
				return 0, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i, true
			}
			i++
		case ' ', '\t', '\n', '\r':
			return 0, false
		default:
			i++
		}
		if depth == 0 && i < len(doc) && (doc[i] == ',' || doc[i] == '}' || doc[i] == ']') {
			return i, true
		}
	}
	return 0, false
}
