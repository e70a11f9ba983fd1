//go:build !linux

package wasi

// reservation is unused where address-space reservations are not implemented.
type reservation struct{}

// reserve returns nil: linear memory is allocated on the heap.
func reserve() *reservation { return nil }

func (r *reservation) grow(uint64) ([]byte, bool) { return nil, false }
func (r *reservation) discard()                   {}
func (r *reservation) release()                   {}
