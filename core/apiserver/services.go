package apiserver

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/servicealloc"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// newServiceAllocator allocates Services' cluster IPs as IPAddress objects served by s,
// and their node ports in cfg.NodePorts.
func newServiceAllocator(s *Server, cfg *Config) (*servicealloc.Services, error) {
	cidr := cfg.ServiceCIDR
	if !cidr.IsValid() {
		cidr = servicealloc.DefaultServiceCIDR
	}
	ips, err := servicealloc.NewIPAllocator(cidr, ipAddressStore{s: s})
	if err != nil {
		return nil, err
	}
	r := cfg.NodePortRange
	if r.Size == 0 {
		r = servicealloc.DefaultNodePortRange
	}
	store := cfg.NodePorts
	if store == nil {
		store = &servicealloc.MemoryRangeStore{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &servicealloc.Services{IPs: ips, Ports: servicealloc.NewPortAllocator(r, store), Log: log}, nil
}

// ipAddressStore keeps IPAddress objects through the server's own ipaddresses store,
// reading etcd (not the watch cache) so that an address freed or taken a moment ago counts.
type ipAddressStore struct{ s *Server }

func (st ipAddressStore) store() (*registry.Store, error) {
	store := st.s.Store(networkingv1.Resource("ipaddresses"))
	if store == nil {
		return nil, fmt.Errorf("ipaddresses are not served")
	}
	return store, nil
}

func (st ipAddressStore) Get(ctx context.Context, name string) (*networkingv1.IPAddress, error) {
	store, err := st.store()
	if err != nil {
		return nil, err
	}
	obj, err := store.Get(ctx, "", name, nil)
	if err != nil {
		return nil, err
	}
	return obj.(*networkingv1.IPAddress), nil
}

func (st ipAddressStore) Create(ctx context.Context, ip *networkingv1.IPAddress) error {
	store, err := st.store()
	if err != nil {
		return err
	}
	_, err = store.Create(ctx, "", ip, registry.WriteOptions{})
	return err
}

func (st ipAddressStore) Delete(ctx context.Context, name string, uid types.UID) error {
	store, err := st.store()
	if err != nil {
		return err
	}
	_, _, err = store.Delete(ctx, "", name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(uid)}}, registry.WriteOptions{})
	return err
}

func (st ipAddressStore) List(ctx context.Context) ([]networkingv1.IPAddress, error) {
	store, err := st.store()
	if err != nil {
		return nil, err
	}
	list, err := store.List(ctx, "", &metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.(*networkingv1.IPAddressList).Items, nil
}

// EnsureServiceCIDR creates the ServiceCIDR "kubernetes" that describes the service
// range, as kube-apiserver does at start, and marks it Ready.
func (s *Server) EnsureServiceCIDR(ctx context.Context) error {
	if s.services == nil {
		return nil
	}
	store := s.Store(networkingv1.Resource("servicecidrs"))
	if store == nil {
		return fmt.Errorf("servicecidrs are not served")
	}
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{s.services.IPs.CIDR().String()}}}
	if _, err := store.Create(ctx, "", cidr, registry.WriteOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default ServiceCIDR: %w", err)
	}
	_, _, err := store.Update(ctx, "", "kubernetes", func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
		c := existing.(*networkingv1.ServiceCIDR).DeepCopy()
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
			Status: metav1.ConditionTrue, Reason: "ServiceCIDRReady", Message: "Kubernetes Service CIDR is ready"})
		return c, nil
	}, registry.UpdateOptions{Strategy: store.Resource.StatusStrategy, AllowUnconditional: true, WriteOptions: registry.WriteOptions{Subresource: "status"}})
	if err != nil {
		return fmt.Errorf("marking the default ServiceCIDR ready: %w", err)
	}
	return nil
}

// ServiceIPs is the allocator of cluster IPs (the `kubernetes` Service takes its first address).
func (s *Server) ServiceIPs() *servicealloc.IPAllocator {
	if s.services == nil {
		return nil
	}
	return s.services.IPs
}
