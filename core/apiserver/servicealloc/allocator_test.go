package servicealloc

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// memIPs keeps IPAddress objects in memory with the store's create-if-absent semantics.
type memIPs struct {
	mu  sync.Mutex
	ips map[string]networkingv1.IPAddress
}

func newMemIPs() *memIPs { return &memIPs{ips: map[string]networkingv1.IPAddress{}} }

var ipResource = networkingv1.Resource("ipaddresses")

func (m *memIPs) Get(_ context.Context, name string) (*networkingv1.IPAddress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.ips[name]
	if !ok {
		return nil, apierrors.NewNotFound(ipResource, name)
	}
	return o.DeepCopy(), nil
}

func (m *memIPs) Create(_ context.Context, ip *networkingv1.IPAddress) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ips[ip.Name]; ok {
		return apierrors.NewAlreadyExists(ipResource, ip.Name)
	}
	o := *ip.DeepCopy()
	o.UID = uuid.NewUUID()
	m.ips[ip.Name] = o
	return nil
}

func (m *memIPs) Delete(_ context.Context, name string, uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.ips[name]
	if !ok {
		return apierrors.NewNotFound(ipResource, name)
	}
	if o.UID != uid {
		return apierrors.NewConflict(ipResource, name, errors.New("uid mismatch"))
	}
	delete(m.ips, name)
	return nil
}

func (m *memIPs) List(context.Context) ([]networkingv1.IPAddress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []networkingv1.IPAddress
	for _, o := range m.ips {
		out = append(out, *o.DeepCopy())
	}
	return out, nil
}

func (m *memIPs) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.ips {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func mustIPs(t *testing.T, cidr string, store IPStore) *IPAllocator {
	t.Helper()
	a, err := NewIPAllocator(netip.MustParsePrefix(cidr), store)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestIPAllocatorAllocate(t *testing.T) {
	owner := ServiceRef("default", "a")
	tests := []struct {
		name, cidr, ip string
		taken          []string
		dryRun         bool
		want           error
		wantNotInRange bool
	}{
		{name: "free address", cidr: "10.96.0.0/12", ip: "10.100.1.2"},
		{name: "the reserved first address on request", cidr: "10.96.0.0/12", ip: "10.96.0.1"},
		{name: "last address", cidr: "10.96.0.0/12", ip: "10.111.255.254"},
		{name: "taken", cidr: "10.96.0.0/12", ip: "10.96.0.10", taken: []string{"10.96.0.10"}, want: ErrIPAllocated},
		{name: "taken, dry run", cidr: "10.96.0.0/12", ip: "10.96.0.10", taken: []string{"10.96.0.10"}, dryRun: true, want: ErrIPAllocated},
		{name: "network address", cidr: "10.96.0.0/12", ip: "10.96.0.0", wantNotInRange: true},
		{name: "broadcast address", cidr: "10.96.0.0/12", ip: "10.111.255.255", wantNotInRange: true},
		{name: "outside", cidr: "10.96.0.0/12", ip: "192.168.1.1", wantNotInRange: true},
		{name: "other family", cidr: "10.96.0.0/12", ip: "fd00::1", wantNotInRange: true},
		{name: "IPv6 range", cidr: "fd00:10:96::/108", ip: "fd00:10:96::5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemIPs()
			a := mustIPs(t, tc.cidr, store)
			for _, ip := range tc.taken {
				if err := a.Allocate(context.Background(), netip.MustParseAddr(ip), ServiceRef("default", "other"), false); err != nil {
					t.Fatal(err)
				}
			}
			err := a.Allocate(context.Background(), netip.MustParseAddr(tc.ip), owner, tc.dryRun)
			var nr *ErrIPNotInRange
			switch {
			case tc.wantNotInRange:
				if !errors.As(err, &nr) {
					t.Fatalf("err = %v, want not in range", err)
				}
				if want := "the provided IP (" + tc.ip + ") is not in the valid range. The range of valid IPs is " + tc.cidr; err.Error() != want {
					t.Errorf("message %q, want %q", err.Error(), want)
				}
			case !errors.Is(err, tc.want) || (tc.want == nil && err != nil):
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			got, _ := store.Get(context.Background(), tc.ip)
			stored := got != nil && *got.Spec.ParentRef == *owner
			if wantStored := err == nil && !tc.dryRun; stored != wantStored {
				t.Errorf("stored for the owner = %v, want %v", stored, wantStored)
			}
			if got != nil && (got.Labels[LabelManagedBy] != ManagedByAllocator || got.Labels[LabelIPFamily] == "") {
				t.Errorf("labels %v", got.Labels)
			}
		})
	}
}

func TestIPAllocatorExhaustionReleaseAndRestart(t *testing.T) {
	ctx := context.Background()
	store := newMemIPs()
	// A /29 has 6 host addresses: .1 is reserved, .2-.6 are handed out.
	a := mustIPs(t, "10.0.0.0/29", store)
	if a.Reserved() != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("reserved %s", a.Reserved())
	}
	got := map[string]bool{}
	for i := range 5 {
		ip, err := a.AllocateNext(ctx, ServiceRef("default", "s"+string(rune('a'+i))), false)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if ip == a.Reserved() || got[ip.String()] {
			t.Fatalf("allocation %d handed out %s (reserved or twice)", i, ip)
		}
		got[ip.String()] = true
	}
	if _, err := a.AllocateNext(ctx, ServiceRef("default", "full"), false); !errors.Is(err, ErrFull) {
		t.Fatalf("allocation past the range: %v, want %v", err, ErrFull)
	}
	// A server started again on the same store sees every address taken.
	restarted := mustIPs(t, "10.0.0.0/29", store)
	if _, err := restarted.AllocateNext(ctx, ServiceRef("default", "full"), true); !errors.Is(err, ErrFull) {
		t.Fatalf("after restart: %v, want %v", err, ErrFull)
	}
	if err := restarted.Allocate(ctx, netip.MustParseAddr("10.0.0.3"), ServiceRef("default", "x"), false); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("after restart, a taken address: %v", err)
	}
	// Only the holder releases an address.
	if err := restarted.Release(ctx, netip.MustParseAddr("10.0.0.3"), ServiceRef("default", "not-the-owner")); err != nil {
		t.Fatal(err)
	}
	if len(store.names()) != 5 {
		t.Fatalf("a release by another owner freed an address: %v", store.names())
	}
	o, _ := store.Get(ctx, "10.0.0.3")
	if err := restarted.Release(ctx, netip.MustParseAddr("10.0.0.3"), o.Spec.ParentRef); err != nil {
		t.Fatal(err)
	}
	ip, err := restarted.AllocateNext(ctx, ServiceRef("default", "late"), false)
	if err != nil || ip.String() != "10.0.0.3" {
		t.Fatalf("after a release: %s, %v; want 10.0.0.3", ip, err)
	}
}

func TestPortAllocator(t *testing.T) {
	tests := []struct {
		name      string
		r         PortRange
		taken     []int
		port      int
		dryRun    bool
		want      error
		wantRange bool
	}{
		{name: "free", r: DefaultNodePortRange, port: 30080},
		{name: "first", r: DefaultNodePortRange, port: 30000},
		{name: "last", r: DefaultNodePortRange, port: 32767},
		{name: "taken", r: DefaultNodePortRange, taken: []int{30080}, port: 30080, want: ErrPortAllocated},
		{name: "taken, dry run", r: DefaultNodePortRange, taken: []int{30080}, port: 30080, dryRun: true, want: ErrPortAllocated},
		{name: "below", r: DefaultNodePortRange, port: 29999, wantRange: true},
		{name: "above", r: DefaultNodePortRange, port: 32768, wantRange: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := &MemoryRangeStore{}
			a := NewPortAllocator(tc.r, store)
			for _, p := range tc.taken {
				if err := a.Allocate(ctx, p, false); err != nil {
					t.Fatal(err)
				}
			}
			err := a.Allocate(ctx, tc.port, tc.dryRun)
			if tc.wantRange {
				var nr *ErrPortNotInRange
				if !errors.As(err, &nr) || err.Error() != "provided port is not in the valid range. The range of valid ports is 30000-32767" {
					t.Fatalf("err = %v, want not in range", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			// A dry run reserves nothing: the port is still free for a real allocation.
			if tc.dryRun || tc.want != nil {
				return
			}
			if err := NewPortAllocator(tc.r, store).Allocate(ctx, tc.port, true); !errors.Is(err, ErrPortAllocated) {
				t.Fatalf("a new allocator on the store does not see %d taken: %v", tc.port, err)
			}
		})
	}
}

func TestPortAllocatorExhaustionRestartAndRangeChange(t *testing.T) {
	ctx := context.Background()
	store := &MemoryRangeStore{}
	r := PortRange{Base: 30000, Size: 4}
	a := NewPortAllocator(r, store)
	seen := map[int]bool{}
	for range 4 {
		p, err := a.AllocateNext(ctx, false)
		if err != nil || !r.Contains(p) || seen[p] {
			t.Fatalf("AllocateNext = %d, %v", p, err)
		}
		seen[p] = true
	}
	if _, err := a.AllocateNext(ctx, false); !errors.Is(err, ErrFull) {
		t.Fatalf("past the range: %v", err)
	}
	// Restart: the bitmap is in the store.
	b := NewPortAllocator(r, store)
	if _, err := b.AllocateNext(ctx, true); !errors.Is(err, ErrFull) {
		t.Fatalf("after restart: %v", err)
	}
	if err := b.Release(ctx, 30002); err != nil {
		t.Fatal(err)
	}
	if p, err := b.AllocateNext(ctx, false); err != nil || p != 30002 {
		t.Fatalf("after release: %d, %v", p, err)
	}
	// A wider range keeps the ports the old one held.
	wide := NewPortAllocator(PortRange{Base: 30002, Size: 10}, store)
	for _, p := range []int{30002, 30003} {
		if err := wide.Allocate(ctx, p, true); !errors.Is(err, ErrPortAllocated) {
			t.Errorf("port %d after a range change: %v, want allocated", p, err)
		}
	}
	if err := wide.Allocate(ctx, 30004, false); err != nil {
		t.Errorf("a new port of the wider range: %v", err)
	}
	var ra corev1.RangeAllocation
	_ = store.Update(ctx, func(cur *corev1.RangeAllocation) error { ra = *cur.DeepCopy(); return nil })
	if ra.Range != "30002-30011" {
		t.Errorf("stored range %q", ra.Range)
	}
}

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortRange
		err  bool
	}{
		{in: "30000-32767", want: DefaultNodePortRange},
		{in: "8080", want: PortRange{Base: 8080, Size: 1}},
		{in: "32767-30000", err: true},
		{in: "0-10", err: true},
		{in: "a-b", err: true},
	} {
		got, err := ParsePortRange(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParsePortRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}
