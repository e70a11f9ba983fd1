package servicealloc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Services reserves the cluster IPs and node ports of Services around their writes; it
// is the services resource's registry.Allocator.
type Services struct {
	IPs   *IPAllocator
	Ports *PortAllocator
	Log   *slog.Logger
}

var serviceKind = schema.GroupKind{Kind: "Service"}

// needsClusterIP: every type but ExternalName has a cluster IP, unless headless.
func needsClusterIP(s *corev1.Service) bool {
	return s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP != corev1.ClusterIPNone
}

// needsNodePorts: NodePort Services, and LoadBalancer ones unless they opt out.
func needsNodePorts(s *corev1.Service) bool {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return ptr.Deref(s.Spec.AllocateLoadBalancerNodePorts, true)
	}
	return false
}

// hasNodePorts: the types whose ports may hold node ports (a LoadBalancer that does
// not allocate them keeps those it names).
func hasNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// needsHealthCheckNodePort: LoadBalancer Services that keep traffic on the node.
func needsHealthCheckNodePort(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// NormalizeClusterIPs makes clusterIP and clusterIPs agree when a client set only one
// of them, as Kubernetes' strategy does (on update, old is the stored Service).
func NormalizeClusterIPs(s, old *corev1.Service) {
	if old != nil && s.Spec.ClusterIP == old.Spec.ClusterIP && len(s.Spec.ClusterIPs) == 0 && s.Spec.ClusterIP != "" {
		s.Spec.ClusterIPs = slices.Clone(old.Spec.ClusterIPs)
	}
	if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
	if s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) > 0 {
		s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
	}
}

// PrepareUpdate carries what the server allocated into an update that does not name it
// (a PUT of the manifest the Service was created from), and drops what a type change
// leaves without meaning, as Kubernetes' patchAllocatedValues and dropTypeDependentFields.
func PrepareUpdate(s, old *corev1.Service) {
	if needsClusterIP(old) && s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = old.Spec.ClusterIP, slices.Clone(old.Spec.ClusterIPs)
	}
	if needsNodePorts(old) && needsNodePorts(s) {
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, op := range old.Spec.Ports {
				if op.Port == p.Port && op.Protocol == p.Protocol {
					p.NodePort = op.NodePort
					break
				}
			}
		}
	}
	if needsHealthCheckNodePort(old) && needsHealthCheckNodePort(s) && s.Spec.HealthCheckNodePort == 0 {
		s.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
	if s.Spec.Type == old.Spec.Type {
		return
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		if s.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(s.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		}
		if slices.Equal(s.Spec.IPFamilies, old.Spec.IPFamilies) {
			s.Spec.IPFamilies = nil
		}
		if ptr.Equal(s.Spec.IPFamilyPolicy, old.Spec.IPFamilyPolicy) {
			s.Spec.IPFamilyPolicy = nil
		}
	}
	if !needsNodePorts(s) && needsNodePorts(old) {
		for i := range s.Spec.Ports {
			if i < len(old.Spec.Ports) && s.Spec.Ports[i].NodePort == old.Spec.Ports[i].NodePort {
				s.Spec.Ports[i].NodePort = 0
			}
		}
	}
	if !needsHealthCheckNodePort(s) && s.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		s.Spec.HealthCheckNodePort = 0
	}
}

// initIPFamilies defaults ipFamilyPolicy and ipFamilies for a single-stack cluster, as
// Kubernetes' initIPFamilyFields does.
func (a *Services) initIPFamilies(s, old *corev1.Service) field.ErrorList {
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	family := a.IPs.Family()
	other := corev1.IPv6Protocol
	if family == corev1.IPv6Protocol {
		other = corev1.IPv4Protocol
	}
	headlessSelectorless := s.Spec.ClusterIP == corev1.ClusterIPNone && len(s.Spec.Selector) == 0
	if s.Spec.IPFamilyPolicy == nil {
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			s.Spec.IPFamilyPolicy = ptr.To(*old.Spec.IPFamilyPolicy)
		case headlessSelectorless:
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		default:
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
	}
	if headlessSelectorless {
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = []corev1.IPFamily{family}
		}
		if len(s.Spec.IPFamilies) < 2 && *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, other)
		}
		return nil
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if *s.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack {
		errs = append(errs, field.Invalid(spec.Child("ipFamilyPolicy"), s.Spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	if len(s.Spec.ClusterIPs) > 1 {
		errs = append(errs, field.Invalid(spec.Child("clusterIPs"), s.Spec.ClusterIPs, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range s.Spec.IPFamilies {
		if f != family {
			errs = append(errs, field.Invalid(spec.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	if len(s.Spec.IPFamilies) == 0 {
		s.Spec.IPFamilies = []corev1.IPFamily{family}
	}
	return errs
}

// allocation is what one write reserved, released again if the write is not stored.
type allocation struct {
	a     *Services
	owner *corev1.Service
	ip    netip.Addr
	ports []int
}

func (al *allocation) release(ctx context.Context) {
	if al.ip.IsValid() {
		if err := al.a.IPs.Release(ctx, al.ip, ServiceRef(al.owner.Namespace, al.owner.Name)); err != nil {
			al.a.log().Error("releasing a cluster IP", "ip", al.ip, "err", err)
		}
	}
	al.a.releasePorts(ctx, al.ports)
}

func (a *Services) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

func (a *Services) releasePorts(ctx context.Context, ports []int) {
	for _, p := range ports {
		if err := a.Ports.Release(ctx, p); err != nil {
			a.log().Error("releasing a node port", "port", p, "err", err)
		}
	}
}

// finish returns the finish func of a write that reserved al and, once stored, frees
// what the replaced object held.
func (al *allocation) finish(dryRun bool, onStored func(context.Context)) func(context.Context, bool) {
	return func(ctx context.Context, stored bool) {
		if dryRun {
			return
		}
		if !stored {
			al.release(ctx)
			return
		}
		if onStored != nil {
			onStored(ctx)
		}
	}
}

// BeginCreate implements registry.Allocator.
func (a *Services) BeginCreate(ctx context.Context, obj runtime.Object, dryRun bool) (func(context.Context, bool), error) {
	s := obj.(*corev1.Service)
	al := &allocation{a: a, owner: s}
	if errs := a.initIPFamilies(s, nil); len(errs) > 0 {
		return nil, apierrors.NewInvalid(serviceKind, s.Name, errs)
	}
	if err := a.allocateIP(ctx, s, al, dryRun); err != nil {
		return nil, err
	}
	if err := a.allocateNodePorts(ctx, s, nil, al, dryRun); err != nil {
		if !dryRun {
			al.release(ctx)
		}
		return nil, err
	}
	return al.finish(dryRun, nil), nil
}

// BeginUpdate implements registry.Allocator.
func (a *Services) BeginUpdate(ctx context.Context, obj, oldObj runtime.Object, dryRun bool) (func(context.Context, bool), error) {
	s, old := obj.(*corev1.Service), oldObj.(*corev1.Service)
	al := &allocation{a: a, owner: s}
	if errs := a.initIPFamilies(s, old); len(errs) > 0 {
		return nil, apierrors.NewInvalid(serviceKind, s.Name, errs)
	}
	var freeIP netip.Addr
	switch {
	case needsClusterIP(s) && (!needsClusterIP(old) || old.Spec.ClusterIP == ""):
		if err := a.allocateIP(ctx, s, al, dryRun); err != nil {
			return nil, err
		}
	case !needsClusterIP(s) && needsClusterIP(old):
		freeIP, _ = netip.ParseAddr(old.Spec.ClusterIP)
	}
	if err := a.allocateNodePorts(ctx, s, old, al, dryRun); err != nil {
		if !dryRun {
			al.release(ctx)
		}
		return nil, err
	}
	// What the old object held and the new one does not is freed once the update is stored.
	kept := heldPorts(s)
	var freePorts []int
	for _, p := range heldPorts(old) {
		if !slices.Contains(kept, p) {
			freePorts = append(freePorts, p)
		}
	}
	return al.finish(dryRun, func(ctx context.Context) {
		if freeIP.IsValid() {
			if err := a.IPs.Release(ctx, freeIP, ServiceRef(old.Namespace, old.Name)); err != nil {
				a.log().Error("releasing a cluster IP", "ip", freeIP, "err", err)
			}
		}
		a.releasePorts(ctx, freePorts)
	}), nil
}

// Release implements registry.Allocator.
func (a *Services) Release(ctx context.Context, obj runtime.Object) {
	s := obj.(*corev1.Service)
	if needsClusterIP(s) {
		for _, v := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
			if ip, err := netip.ParseAddr(v); err == nil {
				if err := a.IPs.Release(ctx, ip, ServiceRef(s.Namespace, s.Name)); err != nil {
					a.log().Error("releasing a cluster IP", "service", s.Namespace+"/"+s.Name, "ip", ip, "err", err)
				}
				break
			}
		}
	}
	a.releasePorts(ctx, heldPorts(s))
}

// heldPorts are the node ports (health check included) a stored Service holds.
func heldPorts(s *corev1.Service) []int {
	var out []int
	if hasNodePorts(s) {
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 && !slices.Contains(out, int(p.NodePort)) {
				out = append(out, int(p.NodePort))
			}
		}
	}
	if s.Spec.HealthCheckNodePort != 0 && !slices.Contains(out, int(s.Spec.HealthCheckNodePort)) {
		out = append(out, int(s.Spec.HealthCheckNodePort))
	}
	return out
}

// allocateIP gives s its cluster IP: the one it asks for, or a free one.
func (a *Services) allocateIP(ctx context.Context, s *corev1.Service, al *allocation, dryRun bool) error {
	if !needsClusterIP(s) {
		return nil
	}
	owner := ServiceRef(s.Namespace, s.Name)
	if s.Spec.ClusterIP == "" {
		ip, err := a.IPs.AllocateNext(ctx, owner, dryRun)
		if errors.Is(err, ErrFull) {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP for Service %q: %w", s.Name, err))
		}
		if err != nil {
			return apierrors.NewInvalid(serviceKind, s.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), s.Spec.ClusterIPs, fmt.Sprintf("failed to allocate IP: %v", err))})
		}
		if !dryRun {
			al.ip = ip
		}
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip.String(), []string{ip.String()}
		return nil
	}
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err == nil {
		err = a.IPs.Allocate(ctx, ip, owner, dryRun)
	}
	if err != nil {
		return apierrors.NewInvalid(serviceKind, s.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), s.Spec.ClusterIPs,
			fmt.Sprintf("failed to allocate IP %v: %v", s.Spec.ClusterIP, err))})
	}
	if !dryRun {
		al.ip = ip
	}
	return nil
}

// allocateNodePorts gives each port of s a node port (ports with the same number share
// one) and the health check node port, keeping those old already holds.
func (a *Services) allocateNodePorts(ctx context.Context, s, old *corev1.Service, al *allocation, dryRun bool) error {
	var held []int
	if old != nil {
		held = heldPorts(old)
	}
	reserve := func(port int, path *field.Path) error {
		if slices.Contains(held, port) || slices.Contains(al.ports, port) {
			return nil
		}
		if err := a.Ports.Allocate(ctx, port, dryRun); err != nil {
			var nr *ErrPortNotInRange
			if errors.Is(err, ErrPortAllocated) || errors.As(err, &nr) {
				return apierrors.NewInvalid(serviceKind, s.Name, field.ErrorList{field.Invalid(path, port, err.Error())})
			}
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
		}
		if !dryRun {
			al.ports = append(al.ports, port)
		}
		return nil
	}
	next := func() (int, error) {
		port, err := a.Ports.AllocateNext(ctx, dryRun)
		if err != nil {
			return 0, apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
		}
		if !dryRun {
			al.ports = append(al.ports, port)
		}
		return port, nil
	}
	if hasNodePorts(s) {
		byPort := map[int32]int32{}
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
			if p.NodePort != 0 {
				if err := reserve(int(p.NodePort), path); err != nil {
					return err
				}
				if _, ok := byPort[p.Port]; !ok {
					byPort[p.Port] = p.NodePort
				}
				continue
			}
			if np, ok := byPort[p.Port]; ok {
				p.NodePort = np
				continue
			}
			// A later port of the same number may name the node port to share.
			for _, q := range s.Spec.Ports[i+1:] {
				if q.Port == p.Port && q.NodePort != 0 {
					if err := reserve(int(q.NodePort), path); err != nil {
						return err
					}
					p.NodePort = q.NodePort
					break
				}
			}
			if p.NodePort == 0 && needsNodePorts(s) {
				np, err := next()
				if err != nil {
					return err
				}
				p.NodePort = int32(np)
			}
			if p.NodePort != 0 {
				byPort[p.Port] = p.NodePort
			}
		}
	}
	if needsHealthCheckNodePort(s) {
		path := field.NewPath("spec", "healthCheckNodePort")
		if s.Spec.HealthCheckNodePort != 0 {
			return reserve(int(s.Spec.HealthCheckNodePort), path)
		}
		np, err := next()
		if err != nil {
			return err
		}
		s.Spec.HealthCheckNodePort = int32(np)
	}
	return nil
}
