package servicealloc

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrPortNotInRange is a requested node port outside the node port range.
type ErrPortNotInRange struct{ ValidPorts string }

func (e *ErrPortNotInRange) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.ValidPorts)
}

// PortRange is a range of ports, Base to Base+Size-1.
type PortRange struct {
	Base, Size int
}

// DefaultNodePortRange is kube-apiserver's --service-node-port-range default.
var DefaultNodePortRange = PortRange{Base: 30000, Size: 2768}

// String is the range as kube-apiserver prints and parses it, "30000-32767".
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1) }

// Contains tells whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Base && port < r.Base+r.Size }

// ParsePortRange parses "30000-32767" (or a single port).
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b > 65535 || b < a {
		return PortRange{}, fmt.Errorf("invalid port range %q: want LOW-HIGH within 1-65535", s)
	}
	return PortRange{Base: a, Size: b - a + 1}, nil
}

// RangeStore keeps one RangeAllocation.
type RangeStore interface {
	// Update applies fn to the stored RangeAllocation (an empty one when none is stored)
	// and stores the result atomically, calling fn again after a concurrent write; an
	// error from fn stores nothing and is returned.
	Update(ctx context.Context, fn func(*corev1.RangeAllocation) error) error
}

// PortAllocator hands out node ports, kept as Kubernetes keeps them: a bitmap of the
// range (bit i = port Base+i) in a RangeAllocation whose range is "LOW-HIGH".
type PortAllocator struct {
	r     PortRange
	store RangeStore
	rand  func(n int) int
}

// NewPortAllocator returns an allocator of r's ports kept in store.
func NewPortAllocator(r PortRange, store RangeStore) *PortAllocator {
	return &PortAllocator{r: r, store: store, rand: rand.IntN}
}

// Range is the range allocated from.
func (a *PortAllocator) Range() PortRange { return a.r }

// bitmap reads the stored bitmap in this allocator's range; one stored for another range
// (the flag changed) keeps the ports both ranges hold.
func (a *PortAllocator) bitmap(ra *corev1.RangeAllocation) *big.Int {
	bits := new(big.Int).SetBytes(ra.Data)
	if ra.Range == "" || ra.Range == a.r.String() {
		return bits
	}
	old, err := ParsePortRange(ra.Range)
	if err != nil {
		return new(big.Int)
	}
	out := new(big.Int)
	for i := range old.Size {
		if p := old.Base + i; bits.Bit(i) == 1 && a.r.Contains(p) {
			out.SetBit(out, p-a.r.Base, 1)
		}
	}
	return out
}

func (a *PortAllocator) setBitmap(ra *corev1.RangeAllocation, bits *big.Int) {
	ra.Range = a.r.String()
	ra.Data = bits.Bytes()
}

// Allocate reserves port; with dryRun it only checks that it is free.
func (a *PortAllocator) Allocate(ctx context.Context, port int, dryRun bool) error {
	if !a.r.Contains(port) {
		return &ErrPortNotInRange{ValidPorts: a.r.String()}
	}
	return a.update(ctx, func(ra *corev1.RangeAllocation) error {
		bits := a.bitmap(ra)
		if bits.Bit(port-a.r.Base) == 1 {
			return ErrPortAllocated
		}
		if dryRun {
			return errDryRun
		}
		a.setBitmap(ra, bits.SetBit(bits, port-a.r.Base, 1))
		return nil
	})
}

// errDryRun stops a dry run's update before anything is stored.
var errDryRun = errors.New("dry run")

// update runs fn in a store update; fn returns errDryRun to end a dry run, which stores
// nothing and is no error.
func (a *PortAllocator) update(ctx context.Context, fn func(*corev1.RangeAllocation) error) error {
	err := a.store.Update(ctx, fn)
	if errors.Is(err, errDryRun) {
		return nil
	}
	return err
}

// AllocateNext reserves a free port from a random place in the range; with dryRun it only
// finds one.
func (a *PortAllocator) AllocateNext(ctx context.Context, dryRun bool) (int, error) {
	var port int
	err := a.update(ctx, func(ra *corev1.RangeAllocation) error {
		bits := a.bitmap(ra)
		start := a.rand(a.r.Size)
		for i := range a.r.Size {
			off := (start + i) % a.r.Size
			if bits.Bit(off) == 0 {
				port = a.r.Base + off
				if dryRun {
					return errDryRun
				}
				a.setBitmap(ra, bits.SetBit(bits, off, 1))
				return nil
			}
		}
		return ErrFull
	})
	if err != nil {
		return 0, err
	}
	return port, nil
}

// Release frees port; a port outside the range or free already is no error.
func (a *PortAllocator) Release(ctx context.Context, port int) error {
	if !a.r.Contains(port) {
		return nil
	}
	return a.update(ctx, func(ra *corev1.RangeAllocation) error {
		bits := a.bitmap(ra)
		a.setBitmap(ra, bits.SetBit(bits, port-a.r.Base, 0))
		return nil
	})
}
