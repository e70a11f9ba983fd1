package wasm

import (
	"testing"
	"unsafe"
)

func TestGuestMemory(t *testing.T) {
	const limit = 4 << 20
	tests := []struct {
		name    string
		grows   []uint64 // sizes asked for in turn
		wantLen int
		refused bool
	}{
		{name: "start", grows: []uint64{1 << 16}, wantLen: 1 << 16},
		{name: "grow within the limit", grows: []uint64{1 << 16, 3 << 16, limit}, wantLen: limit},
		{name: "grow past the limit is refused", grows: []uint64{1 << 16, limit + 1<<16}, wantLen: 1 << 16, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newGuestMemory(limit)
			defer m.Free()
			var first unsafe.Pointer
			for i, size := range tt.grows {
				b := m.Reallocate(size)
				if b == nil {
					continue
				}
				// Fresh bytes read as zero, as WebAssembly requires of grown memory.
				for j := i; j < len(b); j += 4096 {
					if b[j] != 0 {
						t.Fatalf("byte %d of fresh memory is %d", j, b[j])
					}
				}
				b[len(b)-1] = 1
				if first == nil {
					first = unsafe.Pointer(&b[0])
				} else if m.mapped != nil && unsafe.Pointer(&b[0]) != first {
					t.Errorf("memory moved when it grew to %d bytes", size)
				}
			}
			if m.size() != tt.wantLen {
				t.Errorf("size = %d, want %d", m.size(), tt.wantLen)
			}
			if m.refused != tt.refused {
				t.Errorf("refused = %v, want %v", m.refused, tt.refused)
			}
			m.Free()
			if m.mapped != nil || m.buf != nil {
				t.Error("Free left the memory mapped")
			}
		})
	}
}
