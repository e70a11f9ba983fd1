package guest

import (
	"errors"
	"fmt"
)

// The scheduling requests are large (thousands of nodes), so their top level is split
// by this small scanner and each member decoded on its own, rather than by a full
// encoding/json pass over bytes that are mostly already-known node keys.

var errSyntax = errors.New("json syntax error")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// skipValue returns the index after the JSON value that starts at or after b[i].
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errSyntax
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
			j++
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
}

// ScanObject calls fn for each member of the JSON object b with the raw key (without
// quotes, escapes left as they are) and the raw value.
func ScanObject(b []byte, fn func(key, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("request is not a JSON object: %w", errSyntax)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errSyntax
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		start := skipSpace(b, i+1)
		vend, err := skipValue(b, start)
		if err != nil {
			return err
		}
		if err := fn(key, b[start:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == '}' {
			return nil
		}
		if i >= len(b) || b[i] != ',' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
	}
	return errSyntax
}

// ParseUints parses a JSON array of non-negative integers, appending to dst.
func ParseUints(b []byte, dst []uint64) ([]uint64, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return dst, nil
	}
	for i < len(b) {
		var n uint64
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			n = n*10 + uint64(b[i]-'0')
			i++
		}
		if i == start || i-start > 16 {
			return nil, errSyntax
		}
		dst = append(dst, n)
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ']' {
			return dst, nil
		}
		if i >= len(b) || b[i] != ',' {
			return nil, errSyntax
		}
		i = skipSpace(b, i+1)
	}
	return nil, errSyntax
}
