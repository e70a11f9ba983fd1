package wasi

import (
	"runtime"
	"testing"
)

// TestMemoryLimiterGrowsInPlace checks the linear memory's contract: grown memory reads
// zero, keeps what was written, and (with an address-space reservation) does not move, so
// growing copies nothing; a grow past the limit is refused and recorded.
func TestMemoryLimiterGrowsInPlace(t *testing.T) {
	m := newMemoryLimiter(16 * pageSize)
	defer m.release()
	b := m.Reallocate(pageSize)
	if len(b) != pageSize {
		t.Fatalf("first allocation: %d bytes", len(b))
	}
	b[0], b[pageSize-1] = 1, 2
	reserved := m.region != nil
	if runtime.GOOS == "linux" && !reserved {
		t.Error("no address-space reservation on Linux")
	}
	for pages := uint64(2); pages <= 16; pages++ {
		nb := m.Reallocate(pages * pageSize)
		if uint64(len(nb)) != pages*pageSize {
			t.Fatalf("grow to %d pages: %d bytes", pages, len(nb))
		}
		if nb[0] != 1 || nb[pageSize-1] != 2 {
			t.Fatalf("grow to %d pages lost the contents", pages)
		}
		for _, x := range nb[(pages-1)*pageSize:] {
			if x != 0 {
				t.Fatalf("grow to %d pages: new memory is not zero", pages)
			}
		}
		if reserved && &nb[0] != &b[0] {
			t.Fatalf("grow to %d pages moved a reserved memory", pages)
		}
	}
	if m.Reallocate(17*pageSize) != nil || !m.denied.Load() {
		t.Fatal("a grow past the limit was granted")
	}
	if got := m.size.Load(); got != 16*pageSize {
		t.Fatalf("size %d after a refused grow, want %d", got, 16*pageSize)
	}
	// A stopped guest's memory is given back but stays accessible until release.
	m.Free()
	if reserved {
		if b[0] != 0 {
			t.Fatal("freed memory still holds the guest's data")
		}
		b[0] = 3
	}
}
