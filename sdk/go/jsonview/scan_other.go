//go:build !wasm

package jsonview

// Where there is no WebAssembly version of the scanners, the Go code runs.

func skipValue(b []byte, i int) (int, bool) { return skipValueGo(b, i) }

func getMember(b []byte, key string) (start, end int) { return getMemberGo(b, key) }

func isString(q []byte, s string) bool { return isGo(q, s) }
