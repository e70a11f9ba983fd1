package wasi

import (
	"runtime"
	"sync"
	"syscall"
)

// reservationSize is the whole wasm32 address space: a container's limit may be raised
// (UpdateContainerResources) up to it without moving the memory. Inaccessible pages cost
// address space only, not memory or commit charge; 47-bit address space holds 32768 such
// reservations.
const reservationSize = 1 << 32

// reservation is an anonymous mapping of reservationSize bytes of which the first
// committed are readable and writable and the rest inaccessible.
type reservation struct {
	mu        sync.Mutex
	mem       []byte // nil once unmapped
	committed uint64
	cleanup   runtime.Cleanup
}

// reserve maps a reservation, or returns nil when the platform refuses (an address-space
// ulimit), in which case memory is allocated on the heap.
func reserve() *reservation {
	b, err := syscall.Mmap(-1, 0, reservationSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	r := &reservation{mem: b}
	// A limiter dropped without release (an error path that forgot it) must not leak
	// address space; the cleanup runs only once nothing, wazero included, can reach it.
	r.cleanup = runtime.AddCleanup(r, func(b []byte) { _ = syscall.Munmap(b) }, b)
	return r
}

// grow makes the first size bytes accessible; fresh pages read as zero, as WebAssembly
// requires of grown memory.
func (r *reservation) grow(size uint64) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil || size > uint64(len(r.mem)) {
		return nil, false
	}
	if size > r.committed {
		if err := syscall.Mprotect(r.mem[r.committed:size], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil, false
		}
		r.committed = size
	}
	return r.mem[:size:size], true
}

// discard returns the pages' memory to the system; they stay accessible (reading zero)
// for a guest still running out its last instructions.
func (r *reservation) discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem != nil && r.committed > 0 {
		_ = syscall.Madvise(r.mem[:r.committed], syscall.MADV_DONTNEED)
	}
}

// release unmaps the reservation; nothing may touch its memory afterwards.
func (r *reservation) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem != nil {
		// Stopped first: once unmapped, the range may be mapped again by anyone.
		r.cleanup.Stop()
		_ = syscall.Munmap(r.mem)
		r.mem = nil
	}
}
