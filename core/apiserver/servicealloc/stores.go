package servicealloc

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/wasmplane/wasmplane/core/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultServiceCIDR is kubeadm's default service subnet.
var DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// NodePortsKey is where Kubernetes keeps the node port bitmap.
const NodePortsKey = "/registry/ranges/servicenodeports"

// StorageRangeStore keeps the RangeAllocation at Key in Storage (etcd), updated with
// optimistic concurrency so that API servers sharing the etcd never hand out one port twice.
type StorageRangeStore struct {
	Storage storage.Interface
	Key     string
}

// Update implements RangeStore.
func (s StorageRangeStore) Update(ctx context.Context, fn func(*corev1.RangeAllocation) error) error {
	out := &corev1.RangeAllocation{}
	err := s.Storage.GuaranteedUpdate(ctx, s.Key, out, true, nil, func(current runtime.Object, _ storage.ResponseMeta) (runtime.Object, error) {
		ra := current.(*corev1.RangeAllocation).DeepCopy()
		if err := fn(ra); err != nil {
			return nil, err
		}
		return ra, nil
	})
	if err != nil {
		return fmt.Errorf("updating %s: %w", s.Key, err)
	}
	return nil
}

// MemoryRangeStore keeps a RangeAllocation in memory, for a server without etcd of its
// own (tests of the allocators).
type MemoryRangeStore struct {
	mu sync.Mutex
	ra corev1.RangeAllocation
}

// Update implements RangeStore.
func (m *MemoryRangeStore) Update(_ context.Context, fn func(*corev1.RangeAllocation) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ra := m.ra.DeepCopy()
	if err := fn(ra); err != nil {
		return err
	}
	m.ra = *ra
	return nil
}
