package unstructuredjson

// AppendWithMember appends doc to dst with the string member key: value added to the
// object that is doc's top-level member named object, where Append would have written it:
// before the first member whose key sorts after key. doc must be as Append writes content
// (compact, map keys sorted; what follows the document, such as a newline, is copied as
// it is); the bytes appended are then exactly Append of the content with the member
// added. It reports false, having made no promise about dst's new bytes, when doc is not
// so written, has no such object, or the object holds key already or a key with an
// escape in it (whose order it does not work out): the caller encodes the content itself
// then.
//
// A custom object is stored without its resourceVersion (the revision is its version)
// and answered or listed with it: its JSON is its stored bytes with that member inserted.
func AppendWithMember(dst, doc []byte, object, key, value string) ([]byte, bool) {
	if len(doc) < 2 || doc[0] != '{' {
		return dst, false
	}
	// The top-level members, up to the object's opening brace. A key with an escape in
	// it is not object (Append escapes none of the characters of a plain name).
	i, found := 1, false
	for i < len(doc) && doc[i] != '}' {
		k, escaped, next, ok := memberKey(doc, i)
		if !ok {
			return dst, false
		}
		if !escaped && string(k) == object {
			if next >= len(doc) || doc[next] != '{' {
				return dst, false
			}
			i, found = next+1, true
			break
		}
		if i, ok = skipValue(doc, next); !ok {
			return dst, false
		}
		if i < len(doc) && doc[i] == ',' {
			i++
		}
	}
	if !found {
		return dst, false
	}
	// The object's members, up to the first whose key sorts after key.
	at := i
	for at < len(doc) && doc[at] != '}' {
		k, escaped, next, ok := memberKey(doc, at)
		if !ok || escaped || string(k) == key {
			return dst, false
		}
		if string(k) > key {
			break
		}
		end, ok := skipValue(doc, next)
		if !ok || end >= len(doc) {
			return dst, false
		}
		if doc[end] == ',' {
			end++
		}
		at = end
	}
	if at >= len(doc) {
		return dst, false
	}
	dst = append(dst, doc[:at]...)
	if doc[at] == '}' && doc[at-1] != '{' {
		// After the object's last member.
		dst = append(dst, ',')
	}
	dst = AppendString(dst, key)
	dst = append(dst, ':')
	dst = AppendString(dst, value)
	if doc[at] != '}' {
		// Before a member whose key sorts after key.
		dst = append(dst, ',')
	}
	return append(dst, doc[at:]...), true
}

// memberKey reads the key of the member at i ("key":) and returns its raw bytes, whether
// it holds an escape, and the index of its value.
func memberKey(doc []byte, i int) (key []byte, escaped bool, next int, ok bool) {
	if i >= len(doc) || doc[i] != '"' {
		return nil, false, 0, false
	}
	j := i + 1
	for j < len(doc) && doc[j] != '"' {
		if doc[j] == '\\' {
			escaped = true
			j++
		}
		j++
	}
	if j >= len(doc) {
		return nil, false, 0, false
	}
	next = j + 1
	if next >= len(doc) || doc[next] != ':' {
		return nil, false, 0, false
	}
	return doc[i+1 : j], escaped, next + 1, true
}

// skipValue returns the index just after the compact value starting at i.
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
