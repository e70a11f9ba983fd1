//go:build wasm

package jsonview

// skipAsm is skipValue in WebAssembly (scan_wasm.s): the index after the value at b[i],
// or -1.
//
//go:noescape
func skipAsm(b []byte, i int) int

// getAsm is getMemberGo in WebAssembly (scan_wasm.s), except that its start is -2 where a
// key has escapes or bytes outside ASCII, for the Go code to decide.
//
//go:noescape
func getAsm(b []byte, key string) (start, end int)

// isAsm is isGo in WebAssembly (scan_wasm.s) for strings of ASCII without escapes: 1 or 0
// for true or false, -2 for the Go code to decide.
//
//go:noescape
func isAsm(b []byte, s string) int

// skipValue, getMember and isString answer as skipValueGo, getMemberGo and isGo do.
func skipValue(b []byte, i int) (int, bool) {
	end := skipAsm(b, i)
	if end < 0 {
		return 0, false
	}
	return end, true
}

func getMember(b []byte, key string) (start, end int) {
	if start, end = getAsm(b, key); start != -2 {
		return start, end
	}
	return getMemberGo(b, key)
}

func isString(q []byte, s string) bool {
	if r := isAsm(q, s); r >= 0 {
		return r == 1
	}
	return isGo(q, s)
}
