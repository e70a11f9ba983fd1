package servicealloc

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func newServices(t *testing.T) (*Services, *memIPs) {
	t.Helper()
	ips := newMemIPs()
	return &Services{IPs: mustIPs(t, "10.96.0.0/12", ips), Ports: NewPortAllocator(DefaultNodePortRange, &MemoryRangeStore{})}, ips
}

func svc(name string, typ corev1.ServiceType, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func TestServicesBeginCreate(t *testing.T) {
	tests := []struct {
		name    string
		svc     *corev1.Service
		wantErr string
		check   func(t *testing.T, s *corev1.Service)
	}{
		{name: "ClusterIP gets an address and single-stack defaults", svc: svc("a", corev1.ServiceTypeClusterIP),
			check: func(t *testing.T, s *corev1.Service) {
				ip, err := netip.ParseAddr(s.Spec.ClusterIP)
				if err != nil || !netip.MustParsePrefix("10.96.0.0/12").Contains(ip) || ip.String() == "10.96.0.1" {
					t.Errorf("clusterIP %q", s.Spec.ClusterIP)
				}
				if len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
					t.Errorf("clusterIPs %v", s.Spec.ClusterIPs)
				}
				if *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || len(s.Spec.IPFamilies) != 1 || s.Spec.IPFamilies[0] != corev1.IPv4Protocol {
					t.Errorf("families %v %v", *s.Spec.IPFamilyPolicy, s.Spec.IPFamilies)
				}
			}},
		{name: "requested taken address", svc: svc("b", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		}), wantErr: `spec.clusterIPs: Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated`},
		{name: "requested address out of range", svc: svc("c", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "192.168.0.1", []string{"192.168.0.1"}
		}), wantErr: "failed to allocate IP 192.168.0.1: the provided IP (192.168.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{name: "headless", svc: svc("d", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}), check: func(t *testing.T, s *corev1.Service) {
			if s.Spec.ClusterIP != corev1.ClusterIPNone || *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
				t.Errorf("headless: %q %v", s.Spec.ClusterIP, *s.Spec.IPFamilyPolicy)
			}
		}},
		{name: "headless without selector prefers both families", svc: svc("e", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Selector = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}, nil
		}), check: func(t *testing.T, s *corev1.Service) {
			if *s.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack || len(s.Spec.IPFamilies) != 2 {
				t.Errorf("headless selectorless: %v %v", *s.Spec.IPFamilyPolicy, s.Spec.IPFamilies)
			}
		}},
		{name: "dual-stack required", svc: svc("f", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}), wantErr: "this cluster is not configured for dual-stack services"},
		{name: "NodePort: ports of one number share a node port", svc: svc("g", corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 53, Protocol: corev1.ProtocolTCP}, {Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "other", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}}
		}), check: func(t *testing.T, s *corev1.Service) {
			p := s.Spec.Ports
			if p[0].NodePort == 0 || p[0].NodePort != p[1].NodePort || p[2].NodePort != 30080 {
				t.Errorf("node ports %d %d %d", p[0].NodePort, p[1].NodePort, p[2].NodePort)
			}
		}},
		{name: "requested taken node port", svc: svc("h", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }),
			wantErr: "spec.ports[0].nodePort: Invalid value: 30001: provided port is already allocated"},
		{name: "LoadBalancer with local traffic gets a health check port", svc: svc("i", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), check: func(t *testing.T, s *corev1.Service) {
			if s.Spec.HealthCheckNodePort == 0 || s.Spec.Ports[0].NodePort == 0 || s.Spec.HealthCheckNodePort == s.Spec.Ports[0].NodePort {
				t.Errorf("ports %d health %d", s.Spec.Ports[0].NodePort, s.Spec.HealthCheckNodePort)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			a, ips := newServices(t)
			if err := a.IPs.Allocate(ctx, netip.MustParseAddr("10.96.0.10"), ServiceRef("default", "x"), false); err != nil {
				t.Fatal(err)
			}
			if err := a.Ports.Allocate(ctx, 30001, false); err != nil {
				t.Fatal(err)
			}
			finish, err := a.BeginCreate(ctx, tc.svc, false)
			if tc.wantErr != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want 422 with %q", err, tc.wantErr)
				}
				if n := len(ips.names()); n != 1 {
					t.Errorf("a failed create left %d addresses", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			finish(ctx, true)
			tc.check(t, tc.svc)
		})
	}
}

func TestServicesFailedWriteAndUpdateRelease(t *testing.T) {
	ctx := context.Background()
	a, ips := newServices(t)
	// A create whose write fails gives back what it took.
	s := svc("a", corev1.ServiceTypeNodePort)
	finish, err := a.BeginCreate(ctx, s, false)
	if err != nil {
		t.Fatal(err)
	}
	finish(ctx, false)
	if len(ips.names()) != 0 {
		t.Fatalf("addresses left: %v", ips.names())
	}
	if err := a.Ports.Allocate(ctx, int(s.Spec.Ports[0].NodePort), true); err != nil {
		t.Fatalf("node port %d still taken: %v", s.Spec.Ports[0].NodePort, err)
	}
	// NodePort → ClusterIP frees the node port once the update is stored.
	s = svc("b", corev1.ServiceTypeNodePort)
	finish, err = a.BeginCreate(ctx, s, false)
	if err != nil {
		t.Fatal(err)
	}
	finish(ctx, true)
	np := int(s.Spec.Ports[0].NodePort)
	upd := s.DeepCopy()
	upd.Spec.Type = corev1.ServiceTypeClusterIP
	PrepareUpdate(upd, s)
	if upd.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("the node port stayed on a ClusterIP Service")
	}
	finish, err = a.BeginUpdate(ctx, upd, s, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ports.Allocate(ctx, np, true); err == nil {
		t.Fatal("the node port was freed before the update was stored")
	}
	finish(ctx, true)
	if err := a.Ports.Allocate(ctx, np, true); err != nil {
		t.Fatalf("node port not freed: %v", err)
	}
	// → ExternalName gives the cluster IP up; delete releases what is left.
	ext := upd.DeepCopy()
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	PrepareUpdate(ext, upd)
	if ext.Spec.ClusterIP != "" {
		t.Fatalf("clusterIP kept on ExternalName: %q", ext.Spec.ClusterIP)
	}
	finish, err = a.BeginUpdate(ctx, ext, upd, false)
	if err != nil {
		t.Fatal(err)
	}
	finish(ctx, true)
	if len(ips.names()) != 0 {
		t.Fatalf("addresses left after ExternalName: %v", ips.names())
	}
	// A PUT without the allocated values keeps them.
	c := svc("c", corev1.ServiceTypeNodePort)
	finish, _ = a.BeginCreate(ctx, c, false)
	finish(ctx, true)
	put := svc("c", corev1.ServiceTypeNodePort)
	PrepareUpdate(put, c)
	if put.Spec.ClusterIP != c.Spec.ClusterIP || put.Spec.Ports[0].NodePort != c.Spec.Ports[0].NodePort {
		t.Fatalf("PUT lost allocations: %q/%d vs %q/%d", put.Spec.ClusterIP, put.Spec.Ports[0].NodePort, c.Spec.ClusterIP, c.Spec.Ports[0].NodePort)
	}
	a.Release(ctx, c)
	if len(ips.names()) != 0 {
		t.Fatalf("addresses left after delete: %v", ips.names())
	}
	if err := a.Ports.Allocate(ctx, int(c.Spec.Ports[0].NodePort), true); err != nil {
		t.Fatalf("node port not released on delete: %v", err)
	}
}
