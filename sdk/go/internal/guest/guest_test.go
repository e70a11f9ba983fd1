package guest

import (
	"testing"
	"unsafe"
)

// TestInput: a pointer is the request buffer only if this SDK allocated it and has not
// freed it, whether it is the last buffer allocated (found without the map) or an older
// one.
func TestInput(t *testing.T) {
	addr := func(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
	first := Alloc(64, addr)
	second := Alloc(32, addr)
	t.Cleanup(func() { Free(first); Free(second) })
	tests := []struct {
		name  string
		ptr   uint32
		n     uint32
		valid bool
	}{
		{"the last buffer", second, 32, true},
		{"an older buffer", first, 64, true},
		{"a prefix", second, 5, true},
		{"longer than the buffer", second, 33, false},
		{"not a buffer", second + 1, 1, false},
		{"null", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Input(tt.ptr, tt.n); (got != nil) != tt.valid || got != nil && uint32(len(got)) != tt.n {
				t.Fatalf("Input(%#x, %d) = %d bytes, valid %v; want valid %v", tt.ptr, tt.n, len(got), got != nil, tt.valid)
			}
		})
	}
	Free(second)
	if Input(second, 1) != nil {
		t.Error("a freed buffer is still an input")
	}
	if Input(first, 1) == nil {
		t.Error("freeing one buffer lost another")
	}
}
