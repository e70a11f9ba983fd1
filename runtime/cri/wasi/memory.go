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
type memoryLimiter struct {
	limit  atomic.Uint64 // bytes, a multiple of pageSize
	size   atomic.Uint64 // current linear memory size in bytes
	denied atomic.Bool   // a grow past the limit was refused

	mu  sync.Mutex
	buf []byte
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

// Free implements experimental.LinearMemory.
func (m *memoryLimiter) Free() {
	m.mu.Lock()
	m.buf = nil
	m.mu.Unlock()
}
