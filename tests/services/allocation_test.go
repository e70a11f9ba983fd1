package services_test

import (
	"context"
	"encoding/json"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

var serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")

func service(name string, typ corev1.ServiceType, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func withIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP = ip }
}

// wantInvalid checks a 422 naming field with message.
func wantInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want 422 Invalid", err)
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
	}
	t.Fatalf("err = %v, want a cause on %s saying %q", err, field, message)
}

func TestServiceAllocation(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	svcs := cs.CoreV1().Services("default")

	// A ClusterIP Service gets a free address of the range (never the kubernetes one)
	// and Kubernetes' defaults.
	a, err := svcs.Create(ctx, service("a", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(a.Spec.ClusterIP)
	if err != nil || !serviceCIDR.Contains(ip) || ip.String() == "10.96.0.1" || len(a.Spec.ClusterIPs) != 1 || a.Spec.ClusterIPs[0] != a.Spec.ClusterIP {
		t.Fatalf("clusterIP %q clusterIPs %v", a.Spec.ClusterIP, a.Spec.ClusterIPs)
	}
	if a.Spec.Type != corev1.ServiceTypeClusterIP || *a.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack ||
		len(a.Spec.IPFamilies) != 1 || a.Spec.IPFamilies[0] != corev1.IPv4Protocol ||
		*a.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster || a.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		a.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("defaults: %+v", a.Spec)
	}
	// Its address is an IPAddress object naming it.
	ipObj, err := cs.NetworkingV1().IPAddresses().Get(ctx, a.Spec.ClusterIP, metav1.GetOptions{})
	if err != nil || ipObj.Spec.ParentRef == nil || ipObj.Spec.ParentRef.Resource != "services" || ipObj.Spec.ParentRef.Name != "a" {
		t.Fatalf("IPAddress of %s: %+v, %v", a.Spec.ClusterIP, ipObj, err)
	}

	// Requested addresses: taken, out of range, free.
	_, err = svcs.Create(ctx, service("taken", "", withIP("10.96.0.1")), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "failed to allocate IP 10.96.0.1: provided IP is already allocated")
	_, err = svcs.Create(ctx, service("outside", "", withIP("192.168.7.7")), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "is not in the valid range")
	b, err := svcs.Create(ctx, service("b", "", withIP("10.100.0.50")), metav1.CreateOptions{})
	if err != nil || b.Spec.ClusterIP != "10.100.0.50" {
		t.Fatalf("requested free IP: %v %v", b, err)
	}
	// A failed create keeps nothing: the address asked for by a refused Service is free.
	_, err = svcs.Create(ctx, service("bad", corev1.ServiceTypeNodePort, withIP("10.100.0.60"), func(s *corev1.Service) {
		s.Spec.Ports[0].NodePort = 1
	}), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ports[0].nodePort", "provided port is not in the valid range")
	if _, err := cs.NetworkingV1().IPAddresses().Get(ctx, "10.100.0.60", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused Service left its address allocated: %v", err)
	}

	// Headless.
	h, err := svcs.Create(ctx, service("headless", "", withIP(corev1.ClusterIPNone)), metav1.CreateOptions{})
	if err != nil || h.Spec.ClusterIP != corev1.ClusterIPNone || len(h.Spec.ClusterIPs) != 1 || h.Spec.ClusterIPs[0] != corev1.ClusterIPNone {
		t.Fatalf("headless: %+v %v", h, err)
	}

	// NodePort: one from the range, a requested one, a taken one.
	np, err := svcs.Create(ctx, service("np", corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := np.Spec.Ports[0].NodePort; p < 30000 || p > 32767 || np.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("node port %d, externalTrafficPolicy %q", p, np.Spec.ExternalTrafficPolicy)
	}
	_, err = svcs.Create(ctx, service("np2", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = np.Spec.Ports[0].NodePort }), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ports[0].nodePort", "provided port is already allocated")
	lb, err := svcs.Create(ctx, service("lb", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31000 }), metav1.CreateOptions{})
	if err != nil || lb.Spec.Ports[0].NodePort != 31000 {
		t.Fatalf("LoadBalancer with a requested node port: %+v %v", lb, err)
	}

	// Type change and delete release.
	np.Spec.Type = corev1.ServiceTypeClusterIP
	if np, err = svcs.Update(ctx, np, metav1.UpdateOptions{}); err != nil || np.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("NodePort → ClusterIP: %+v %v", np, err)
	}
	if err := svcs.Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, service("lb2", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31000 }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the node port of a deleted Service is not free: %v", err)
	}
	if err := svcs.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.NetworkingV1().IPAddresses().Get(ctx, "10.100.0.50", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("IPAddress of a deleted Service: %v", err)
	}
	if _, err := svcs.Create(ctx, service("b2", "", withIP("10.100.0.50")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the address of a deleted Service is not free: %v", err)
	}

	// A restarted server knows what is taken.
	s = s.Restart(t)
	cs = s.Clientset(t, false)
	_, err = cs.CoreV1().Services("default").Create(ctx, service("after", "", withIP(a.Spec.ClusterIP)), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.clusterIPs", "provided IP is already allocated")
	_, err = cs.CoreV1().Services("default").Create(ctx, service("after2", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 31000 }), metav1.CreateOptions{})
	wantInvalid(t, err, "spec.ports[0].nodePort", "provided port is already allocated")

	// `kubectl get svc` columns.
	raw, err := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("services").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if got := strings.Join(cols, " "); got != "Name Type Cluster-IP External-IP Port(s) Age" {
		t.Fatalf("columns %q", got)
	}
	for _, r := range table.Rows {
		if r.Cells[0] == "lb2" && (r.Cells[1] != "NodePort" || r.Cells[3] != "<none>" || r.Cells[4] != "80:31000/TCP") {
			t.Errorf("row %v", r.Cells)
		}
	}
}

// addresses are the ready addresses of the kubernetes Endpoints and EndpointSlice, or
// nil while the two disagree or the port is not port (0 = any).
func kubernetesAddresses(ctx context.Context, cs kubernetes.Interface, port int32) ([]string, error) {
	ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sl, err := cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Ports) != 1 || (port != 0 && ep.Subsets[0].Ports[0].Port != port) ||
		sl.Labels[discoveryv1.LabelServiceName] != "kubernetes" || sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Ports) != 1 ||
		*sl.Ports[0].Port != ep.Subsets[0].Ports[0].Port || len(sl.Endpoints) != len(ep.Subsets[0].Addresses) {
		return nil, nil
	}
	var out []string
	for i, a := range ep.Subsets[0].Addresses {
		if e := sl.Endpoints[i]; len(e.Addresses) != 1 || e.Addresses[0] != a.IP || !*e.Conditions.Ready {
			return nil, nil
		}
		out = append(out, a.IP)
	}
	return out, nil
}

func waitKubernetesAddresses(t *testing.T, cs kubernetes.Interface, port int32, want ...string) {
	t.Helper()
	waitfor.Condition(t, 30*time.Second, "kubernetes endpoints "+strings.Join(want, ","), func(ctx context.Context) (bool, error) {
		got, err := kubernetesAddresses(ctx, cs, port)
		return strings.Join(got, ",") == strings.Join(want, ","), err
	})
}

func TestKubernetesService(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	s := testserver.StartAPI(t, func(c *server.Config) { c.AdvertiseAddress = netip.MustParseAddr("127.0.0.2") })
	cs := s.Clientset(t, false)
	ctx := context.Background()
	port := int32(s.Port)
	k, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the kubernetes Service: %v", err)
	}
	if k.Spec.ClusterIP != "10.96.0.1" || len(k.Spec.Ports) != 1 || k.Spec.Ports[0].Name != "https" || k.Spec.Ports[0].Port != 443 ||
		k.Spec.Ports[0].TargetPort.IntVal != port || k.Labels["component"] != "apiserver" || k.Labels["provider"] != "kubernetes" {
		t.Fatalf("kubernetes Service %+v", k)
	}
	waitKubernetesAddresses(t, cs, port, "127.0.0.2")
	// Someone changing the Service or deleting the endpoints is undone.
	k.Spec.Ports[0].Port = 8443
	if _, err := cs.CoreV1().Services("default").Update(ctx, k, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Endpoints("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "the kubernetes Service restored", func(ctx context.Context) (bool, error) {
		k, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil && k.Spec.Ports[0].Port == 443, err
	})
	waitKubernetesAddresses(t, cs, port, "127.0.0.2")
	// IPAddress and ServiceCIDR are served as kube-apiserver 1.37 serves them.
	cidr, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(cidr.Spec.CIDRs) != 1 || cidr.Spec.CIDRs[0] != "10.96.0.0/12" || len(cidr.Status.Conditions) != 1 ||
		cidr.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("ServiceCIDR kubernetes: %+v %v", cidr, err)
	}
	if ip, err := cs.NetworkingV1().IPAddresses().Get(ctx, "10.96.0.1", metav1.GetOptions{}); err != nil || ip.Spec.ParentRef.Name != "kubernetes" {
		t.Fatalf("IPAddress 10.96.0.1: %+v %v", ip, err)
	}

	// A second API server on the same etcd adds itself, and takes itself out when it stops.
	s2 := testserver.StartAPI(t, func(c *server.Config) {
		c.EtcdServers = s.EtcdEndpoints()
		c.AdvertiseAddress = netip.MustParseAddr("127.0.0.3")
	})
	waitKubernetesAddresses(t, cs, 0, "127.0.0.2", "127.0.0.3")
	s2.Close()
	waitKubernetesAddresses(t, cs, 0, "127.0.0.2")
}
