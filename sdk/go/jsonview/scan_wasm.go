//go:build wasm

package jsonview

// skipAsm is skipValue in WebAssembly (scan_wasm.s): the index after the value at b[i],
// or -1.
//
//go:noescape
func skipAsm(b []byte, i int) int

// findAsm is findMember in WebAssembly (scan_wasm.s), except that it answers -2 where a key
// has escapes or bytes outside ASCII, for the Go code to decide.
//
//go:noescape
func findAsm(b []byte, key string) int

func skipValue(b []byte, i int) (int, bool) {
	end := skipAsm(b, i)
	if end < 0 {
		return 0, false
	}
	return end, true
}

func findMember(b []byte, key string) int {
	if start := findAsm(b, key); start != -2 {
		return start
	}
	return findMemberGo(b, key)
}
