package wasm

import (
	"runtime"

	"github.com/tetratelabs/wazero/experimental"
)

// limitedMemory backs one instance's linear memory. It enforces the plugin's memory limit
// itself (wazero's page limit is per runtime, plugins differ) and remembers a refused
// grow, which is how an out-of-memory is told apart from other traps.
type limitedMemory struct {
	buf     []byte
	max     uint64
	refused bool
	// mapped is the reserved mapping buf lives in (Linux), nil when buf is on the Go heap.
	mapped  []byte
	cleanup runtime.Cleanup
}

func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		m.refused = true
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Memory never shrinks, so bytes past len were never exposed and are still zero.
		m.buf = m.buf[:size]
		return m.buf
	}
	c := max(size, 2*uint64(cap(m.buf)))
	c = min(c, m.max)
	nb := make([]byte, size, c)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

func (m *limitedMemory) Free() {
	m.buf = nil
	m.unmap()
}

func (m *limitedMemory) size() int { return len(m.buf) }

var _ experimental.LinearMemory = (*limitedMemory)(nil)
