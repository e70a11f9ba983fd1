//go:build !wasm

package jsonview

func skipValue(b []byte, i int) (int, bool) { return skipValueGo(b, i) }

func findMember(b []byte, key string) int { return findMemberGo(b, key) }
