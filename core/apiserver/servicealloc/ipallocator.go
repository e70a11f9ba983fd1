// Package servicealloc allocates what Services claim from ranges shared by the whole
// cluster, as kube-apiserver's service registry does: cluster IPs from the service CIDR
// (each kept as a networking.k8s.io/v1 IPAddress object, as kube-apiserver 1.37 keeps
// them) and node ports from the node port range (a bitmap in a RangeAllocation at
// /registry/ranges/servicenodeports). Both live in etcd, so a restarted server, or
// another server of the cluster, never hands out what is taken.
package servicealloc

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kubernetes' allocator errors, with its texts (clients and e2e tests match on them).
var (
	// ErrFull means every address or port of the range is taken.
	ErrFull = errors.New("range is full")
	// ErrIPAllocated means a requested IP is taken.
	ErrIPAllocated = errors.New("provided IP is already allocated")
	// ErrPortAllocated means a requested node port is taken.
	ErrPortAllocated = errors.New("provided port is already allocated")
)

// ErrIPNotInRange is a requested IP outside the service CIDR's allocatable addresses.
type ErrIPNotInRange struct {
	IP         netip.Addr
	ValidRange string
}

func (e *ErrIPNotInRange) Error() string {
	return fmt.Sprintf("the provided IP (%v) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}

// Labels kube-apiserver's allocator puts on the IPAddress objects it creates.
const (
	LabelIPFamily  = "ipaddress.kubernetes.io/ip-family"
	LabelManagedBy = "ipaddress.kubernetes.io/managed-by"
	// ManagedByAllocator is the value of LabelManagedBy.
	ManagedByAllocator = "ipallocator.k8s.io"
)

// IPStore keeps IPAddress objects; creating one that exists must fail with an
// AlreadyExists error, which is what makes an allocation atomic across servers.
type IPStore interface {
	Get(ctx context.Context, name string) (*networkingv1.IPAddress, error)
	Create(ctx context.Context, ip *networkingv1.IPAddress) error
	Delete(ctx context.Context, name string, uid types.UID) error
	List(ctx context.Context) ([]networkingv1.IPAddress, error)
}

// IPAllocator hands out the addresses of one CIDR. The network address (and, for IPv4,
// the broadcast address) are never handed out, and the first address after the network
// address is reserved for the `kubernetes` Service: only a request naming it gets it.
type IPAllocator struct {
	cidr  netip.Prefix
	base  *big.Int // the reserved first address
	size  int64    // allocatable addresses, the reserved one included
	store IPStore
	rand  func(n int64) int64
}

// maxRangeSize bounds how many addresses of a large (IPv6) range are used, as
// Kubernetes bounds its bitmaps.
const maxRangeSize = 1 << 24

// NewIPAllocator returns an allocator of cidr's addresses kept in store.
func NewIPAllocator(cidr netip.Prefix, store IPStore) (*IPAllocator, error) {
	cidr = cidr.Masked()
	hostBits := cidr.Addr().BitLen() - cidr.Bits()
	if hostBits < 2 {
		return nil, fmt.Errorf("service CIDR %s is too small", cidr)
	}
	size := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	size.Sub(size, big.NewInt(1)) // the network address
	if cidr.Addr().Is4() {
		size.Sub(size, big.NewInt(1)) // the broadcast address
	}
	n := int64(maxRangeSize)
	if size.IsInt64() && size.Int64() < n {
		n = size.Int64()
	}
	base := new(big.Int).Add(addrInt(cidr.Addr()), big.NewInt(1))
	return &IPAllocator{cidr: cidr, base: base, size: n, store: store, rand: rand.Int64N}, nil
}

// CIDR is the range allocated from.
func (a *IPAllocator) CIDR() netip.Prefix { return a.cidr }

// Family is the IP family of the range.
func (a *IPAllocator) Family() corev1.IPFamily {
	if a.cidr.Addr().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// Reserved is the first address, the `kubernetes` Service's.
func (a *IPAllocator) Reserved() netip.Addr { return a.addr(0) }

func (a *IPAllocator) addr(offset int64) netip.Addr {
	v := new(big.Int).Add(a.base, big.NewInt(offset))
	b := v.FillBytes(make([]byte, a.cidr.Addr().BitLen()/8))
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// offset is ip's index in the range, or -1 outside it.
func (a *IPAllocator) offset(ip netip.Addr) int64 {
	if !a.cidr.Contains(ip) {
		return -1
	}
	d := new(big.Int).Sub(addrInt(ip), a.base)
	if d.Sign() < 0 || !d.IsInt64() || d.Int64() >= a.size {
		return -1
	}
	return d.Int64()
}

func addrInt(ip netip.Addr) *big.Int { return new(big.Int).SetBytes(ip.AsSlice()) }

// Allocate reserves ip for owner; with dryRun it only checks that ip is free.
func (a *IPAllocator) Allocate(ctx context.Context, ip netip.Addr, owner *networkingv1.ParentReference, dryRun bool) error {
	ip = ip.Unmap()
	if a.offset(ip) < 0 {
		return &ErrIPNotInRange{IP: ip, ValidRange: a.cidr.String()}
	}
	if dryRun {
		_, err := a.store.Get(ctx, ip.String())
		switch {
		case err == nil:
			return ErrIPAllocated
		case apierrors.IsNotFound(err):
			return nil
		default:
			return fmt.Errorf("reading IPAddress %s: %w", ip, err)
		}
	}
	err := a.store.Create(ctx, a.object(ip, owner))
	if apierrors.IsAlreadyExists(err) {
		return ErrIPAllocated
	}
	if err != nil {
		return fmt.Errorf("creating IPAddress %s: %w", ip, err)
	}
	return nil
}

// AllocateNext reserves a free address (never the reserved first one) for owner; with
// dryRun it only finds one.
func (a *IPAllocator) AllocateNext(ctx context.Context, owner *networkingv1.ParentReference, dryRun bool) (netip.Addr, error) {
	if a.size <= 1 {
		return netip.Addr{}, ErrFull
	}
	// A random pick is free nearly always in a large range; a small or crowded one is
	// scanned from the stored addresses below.
	for range 8 {
		ip := a.addr(1 + a.rand(a.size-1))
		err := a.Allocate(ctx, ip, owner, dryRun)
		if err == nil {
			return ip, nil
		}
		if !errors.Is(err, ErrIPAllocated) {
			return netip.Addr{}, err
		}
	}
	for range 4 {
		list, err := a.store.List(ctx)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("listing IPAddresses: %w", err)
		}
		taken := map[int64]bool{}
		for _, o := range list {
			if ip, err := netip.ParseAddr(o.Name); err == nil {
				if off := a.offset(ip); off > 0 {
					taken[off] = true
				}
			}
		}
		if int64(len(taken)) >= a.size-1 {
			return netip.Addr{}, ErrFull
		}
		start := a.rand(a.size - 1)
		for i := range a.size - 1 {
			off := 1 + (start+i)%(a.size-1)
			if taken[off] {
				continue
			}
			ip := a.addr(off)
			err := a.Allocate(ctx, ip, owner, dryRun)
			if err == nil {
				return ip, nil
			}
			if !errors.Is(err, ErrIPAllocated) {
				return netip.Addr{}, err
			}
			break // taken since the list: list again
		}
	}
	return netip.Addr{}, ErrFull
}

// Release frees ip if owner holds it.
func (a *IPAllocator) Release(ctx context.Context, ip netip.Addr, owner *networkingv1.ParentReference) error {
	o, err := a.store.Get(ctx, ip.Unmap().String())
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading IPAddress %s: %w", ip, err)
	}
	if o.Spec.ParentRef == nil || *o.Spec.ParentRef != *owner {
		return nil
	}
	if err := a.store.Delete(ctx, o.Name, o.UID); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting IPAddress %s: %w", ip, err)
	}
	return nil
}

func (a *IPAllocator) object(ip netip.Addr, owner *networkingv1.ParentReference) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip.String(), Labels: map[string]string{
			LabelIPFamily: string(a.Family()), LabelManagedBy: ManagedByAllocator}},
		Spec: networkingv1.IPAddressSpec{ParentRef: owner.DeepCopy()},
	}
}

// ServiceRef is the parentRef of the IPAddress of a Service's cluster IP.
func ServiceRef(namespace, name string) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: namespace, Name: name}
}
