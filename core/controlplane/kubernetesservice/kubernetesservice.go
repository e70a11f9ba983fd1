// Package kubernetesservice keeps the `default/kubernetes` Service and its Endpoints and
// EndpointSlice, as kube-apiserver's kubernetesservice controller and its lease endpoint
// reconciler (--endpoint-reconciler-type=lease) do: every API server holds a Lease naming
// its address and renews it; the endpoints list the addresses of the Leases not expired,
// so servers that join or die are added and dropped.
package kubernetesservice

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Names and labels Kubernetes uses.
const (
	// Name is the Service's (and its Endpoints' and EndpointSlice's) name in "default".
	Name = "kubernetes"
	// PortName is the Service port's name.
	PortName = "https"
	// LeaseLabel marks the Leases of API server addresses in kube-system.
	LeaseLabel = "wasmplane.io/apiserver-endpoint"
	// leasePrefix starts the name of each API server's address Lease.
	leasePrefix = "apiserver-endpoint-"
)

// Config configures the reconciler.
type Config struct {
	// Client reaches the API server (its loopback client).
	Client kubernetes.Interface
	// ClusterIP is the Service's address, the service range's first.
	ClusterIP netip.Addr
	// PublicIP is this API server's address, listed in the endpoints.
	PublicIP netip.Addr
	// Port is the API server's secure port, the Service port's target.
	Port int32
	// Interval is how often everything is reconciled and the Lease renewed (default 10 s,
	// kube-apiserver's); the Lease lasts 15 s unless LeaseDuration says otherwise.
	Interval, LeaseDuration time.Duration
	// Logger receives logs.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Reconciler keeps the `kubernetes` Service of one API server.
type Reconciler struct{ cfg Config }

// New returns a reconciler for cfg.
func New(cfg Config) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{cfg: cfg}
}

// Run reconciles until ctx ends, then removes this server from the endpoints (with a
// bounded wait of its own, since ctx is done by then).
func (r *Reconciler) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("reconciling the kubernetes Service", "err", err)
		}
	}, r.cfg.Interval)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.RemoveSelf(stopCtx); err != nil {
		r.cfg.Logger.Warn("removing this API server from the kubernetes endpoints", "err", err)
	}
}

// Reconcile makes the Service, renews this server's Lease and rewrites the endpoints.
func (r *Reconciler) Reconcile(ctx context.Context) error {
	if err := r.ensureService(ctx); err != nil {
		return err
	}
	if err := r.renewLease(ctx); err != nil {
		return err
	}
	return r.reconcileEndpoints(ctx, false)
}

// RemoveSelf deletes this server's Lease and drops its address from the endpoints.
func (r *Reconciler) RemoveSelf(ctx context.Context) error {
	err := r.cfg.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(ctx, r.leaseName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the endpoint Lease: %w", err)
	}
	return r.reconcileEndpoints(ctx, true)
}

func (r *Reconciler) servicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{{Name: PortName, Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(r.cfg.Port)}}
}

// ensureService creates the Service, and puts its ports and type back if changed, as
// kube-apiserver does.
func (r *Reconciler) ensureService(ctx context.Context) error {
	svcs := r.cfg.Client.CoreV1().Services(metav1.NamespaceDefault)
	s, err := svcs.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ip := r.cfg.ClusterIP.String()
		_, err = svcs.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{"provider": "kubernetes", "component": "apiserver"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				Ports: r.servicePorts(), SessionAffinity: corev1.ServiceAffinityNone},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("creating the kubernetes Service: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	want := r.servicePorts()
	if s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Name == want[0].Name &&
		s.Spec.Ports[0].Port == want[0].Port && s.Spec.Ports[0].TargetPort == want[0].TargetPort && s.Spec.Ports[0].Protocol == want[0].Protocol {
		return nil
	}
	s.Spec.Type, s.Spec.Ports = corev1.ServiceTypeClusterIP, want
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("updating the kubernetes Service: %w", err)
	}
	return nil
}

func (r *Reconciler) leaseName() string {
	return leasePrefix + strings.NewReplacer(".", "-", ":", "-").Replace(r.cfg.PublicIP.String())
}

func (r *Reconciler) renewLease(ctx context.Context) error {
	leases := r.cfg.Client.CoordinationV1().Leases(metav1.NamespaceSystem)
	now := metav1.NewMicroTime(r.cfg.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.cfg.PublicIP.String()),
		LeaseDurationSeconds: ptr.To(int32(r.cfg.LeaseDuration / time.Second)), RenewTime: &now}
	l, err := leases.Get(ctx, r.leaseName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: r.leaseName(), Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{LeaseLabel: "true"}}, Spec: spec}, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec = spec
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("renewing the endpoint Lease: %w", err)
	}
	return nil
}

// liveAddresses are the addresses of the unexpired endpoint Leases, sorted.
func (r *Reconciler) liveAddresses(ctx context.Context, withoutSelf bool) ([]string, error) {
	list, err := r.cfg.Client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: LeaseLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("listing endpoint Leases: %w", err)
	}
	now := r.cfg.Now()
	var out []string
	for _, l := range list.Items {
		if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		if l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).Before(now) {
			continue
		}
		ip, err := netip.ParseAddr(*l.Spec.HolderIdentity)
		if err != nil || (withoutSelf && ip == r.cfg.PublicIP) || slices.Contains(out, ip.String()) {
			continue
		}
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out, nil
}

// reconcileEndpoints writes the Endpoints and EndpointSlice of the live addresses.
func (r *Reconciler) reconcileEndpoints(ctx context.Context, withoutSelf bool) error {
	addrs, err := r.liveAddresses(ctx, withoutSelf)
	if err != nil {
		return err
	}
	if err := r.writeEndpoints(ctx, addrs); err != nil {
		return err
	}
	return r.writeSlice(ctx, addrs)
}

func (r *Reconciler) writeEndpoints(ctx context.Context, addrs []string) error {
	want := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: metav1.NamespaceDefault,
		Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}}}
	if len(addrs) > 0 {
		ss := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: PortName, Port: r.cfg.Port, Protocol: corev1.ProtocolTCP}}}
		for _, a := range addrs {
			ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: a})
		}
		want.Subsets = []corev1.EndpointSubset{ss}
	}
	eps := r.cfg.Client.CoreV1().Endpoints(metav1.NamespaceDefault)
	cur, err := eps.Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = eps.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		if apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) && apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
			return nil
		}
		cur.Subsets, cur.Labels = want.Subsets, want.Labels
		_, err = eps.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the kubernetes Endpoints: %w", err)
	}
	return nil
}

func (r *Reconciler) writeSlice(ctx context.Context, addrs []string) error {
	addressType := discoveryv1.AddressTypeIPv4
	if r.cfg.PublicIP.Is6() && !r.cfg.PublicIP.Is4In6() {
		addressType = discoveryv1.AddressTypeIPv6
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: Name}},
		AddressType: addressType,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(PortName), Port: ptr.To(r.cfg.Port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	slices := r.cfg.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := slices.Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		if cur.AddressType == want.AddressType && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
			apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) && apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
			return nil
		}
		if cur.AddressType != want.AddressType {
			if err = slices.Delete(ctx, Name, metav1.DeleteOptions{}); err == nil {
				_, err = slices.Create(ctx, want, metav1.CreateOptions{})
			}
			break
		}
		cur.Endpoints, cur.Ports, cur.Labels = want.Endpoints, want.Ports, want.Labels
		_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the kubernetes EndpointSlice: %w", err)
	}
	return nil
}
