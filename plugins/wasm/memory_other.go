//go:build !linux

package wasm

// newGuestMemory returns a memory that grows on the Go heap.
func newGuestMemory(max uint64) *limitedMemory { return &limitedMemory{max: max} }

func (m *limitedMemory) unmap() {}
