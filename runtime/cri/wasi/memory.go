package wasi

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// pageSize is the WebAssembly page size.
const pageSize = 64 << 10

// memoryLimiter is a per-instance wazero memory allocator. wazero's own limit is per
// runtime; enforcing the container's limit here lets one runtime (and one compiled module
// per image) serve every limit. It also records the size for stats and whether a grow was
// refused, which is how an out-of-memory exit is told apart from an ordinary failure.
//
// Linear memory lives in an address-space reservation (see reserve) where the platform
// has one: growing it then only makes more of the reservation accessible, where a Go
// heap buffer must be copied to a larger one. Copying was a quarter of the runtime's CPU
// time when starting Go guests, which grow their memory dozens of times while starting.
type memoryLimiter struct {
	limit  atomic.Uint64 // bytes, a multiple of pageSize
	size   atomic.Uint64 // current linear memory size in bytes
	denied atomic.Bool   // a grow past the limit was refused

	mu       sync.Mutex
	buf      []byte
	region   *reservation // nil: buf is on the Go heap
	reserved bool         // a reservation was tried (it is tried once)
}

// limitPages rounds a CRI memory limit down to whole wasm pages; 0 or negative means the
// default cap. At least one page is always allowed.
func limitBytes(memoryLimitInBytes int64) uint64 {
	if memoryLimitInBytes <= 0 {
		return DefaultMemoryLimit
	}
	b := uint64(memoryLimitInBytes) / pageSize * pageSize
	if b < pageSize {
		b = pageSize
	}
	if b > 1<<32 {
		b = 1 << 32
	}
	return b
}

func newMemoryLimiter(memoryLimitInBytes int64) *memoryLimiter {
	m := &memoryLimiter{}
	m.limit.Store(limitBytes(memoryLimitInBytes))
	return m
}

// setLimit changes the limit of a running instance (UpdateContainerResources); memory
// already allocated is kept.
func (m *memoryLimiter) setLimit(memoryLimitInBytes int64) {
	m.limit.Store(limitBytes(memoryLimitInBytes))
}

// Allocate implements experimental.MemoryAllocator.
func (m *memoryLimiter) Allocate(_, _ uint64) experimental.LinearMemory { return m }

// Reallocate implements experimental.LinearMemory. The module's declared minimum is always
// granted (wazero cannot fail instantiation here); a minimum above the limit is recorded as
// denied and the start fails with OOMKilled.
func (m *memoryLimiter) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > m.limit.Load() {
		m.denied.Store(true)
		if m.buf != nil {
			return nil
		}
	}
	if !m.reserved {
		m.reserved = true
		m.region = reserve()
	}
	if m.region != nil {
		if b, ok := m.region.grow(size); ok {
			m.buf = b
			m.size.Store(size)
			return m.buf
		}
		// Past the reservation (a limit raised beyond 4 GiB cannot happen; a failed
		// mprotect can): continue on the heap, where buf is copied like any other.
		m.buf = append([]byte(nil), m.buf...)
		m.region.release()
		m.region = nil
	}
	if size <= uint64(cap(m.buf)) {
		// Bytes past the old length were never handed out (memory only grows), so they
		// are still zero as WebAssembly requires.
		m.buf = m.buf[:size]
	} else {
		// Grow geometrically up to the limit so a guest growing page by page does not copy
		// its whole memory on every grow.
		c := max(size, uint64(cap(m.buf))*2)
		if l := m.limit.Load(); c > l && size <= l {
			c = l
		}
		nb := make([]byte, size, c)
		copy(nb, m.buf)
		m.buf = nb
	}
	m.size.Store(size)
	return m.buf
}

// Free implements experimental.LinearMemory. wazero calls it when the module closes,
// which a stop does from another goroutine while the guest may still run until its next
// check of the exit flag: a reservation therefore gives its pages back here but stays
// mapped until release.
func (m *memoryLimiter) Free() {
	m.mu.Lock()
	m.buf = nil
	if m.region != nil {
		m.region.discard()
	}
	m.mu.Unlock()
}

// release unmaps the reservation; the caller guarantees no guest code of this instance
// runs any more (its call returned, or it never started).
func (m *memoryLimiter) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf = nil
	if m.region != nil {
		m.region.release()
		m.region = nil
	}
}
