package endpointslicemirroring

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func addrs(n int, base string) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, n)
	for i := range out {
		out[i] = corev1.EndpointAddress{IP: fmt.Sprintf("%s.%d.%d", base, i/250, i%250)}
	}
	return out
}

func TestDesired(t *testing.T) {
	http := []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	dns := []corev1.EndpointPort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}
	for _, tc := range []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    []string // per slice: family/ports/endpoints
	}{
		{"nothing", nil, nil},
		{"one family, ready and not", []corev1.EndpointSubset{{Ports: http,
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}}},
			[]string{"IPv4/1/2"}},
		{"two families", []corev1.EndpointSubset{{Ports: http,
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "fd00::1"}, {IP: "::ffff:10.0.0.9"}}}},
			[]string{"IPv4/1/2", "IPv6/1/1"}},
		{"subsets with the same ports share a slice", []corev1.EndpointSubset{
			{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}},
			{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}}},
			[]string{"IPv4/1/2"}},
		{"other ports, other slice", []corev1.EndpointSubset{
			{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}},
			{Ports: dns, Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}}},
			[]string{"IPv4/1/1", "IPv4/2/1"}},
		{"a subset is cut at 1,000 addresses", []corev1.EndpointSubset{{Ports: http, Addresses: addrs(1200, "10.1")}},
			[]string{"IPv4/1/1000"}},
		{"slices hold at most 1,000", []corev1.EndpointSubset{
			{Ports: http, Addresses: addrs(800, "10.1")}, {Ports: http, Addresses: addrs(700, "10.2")}},
			[]string{"IPv4/1/1000", "IPv4/1/500"}},
		{"bad addresses are skipped", []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "nope"}, {IP: "10.0.0.1"}}}},
			[]string{"IPv4/1/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "u1",
				Labels:      map[string]string{"team": "a"},
				Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "x", "keep": "y"}}, Subsets: tc.subsets}
			got := Desired(ep)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d slices, want %d", len(got), len(tc.want))
			}
			for i, s := range got {
				if d := fmt.Sprintf("%s/%d/%d", s.AddressType, len(s.Ports), len(s.Endpoints)); d != tc.want[i] {
					t.Errorf("slice %d = %s, want %s", i, d, tc.want[i])
				}
				if s.GenerateName != "svc-" || s.Labels[discoveryv1.LabelServiceName] != "svc" ||
					s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels["team"] != "a" {
					t.Errorf("slice %d meta: %s %v", i, s.GenerateName, s.Labels)
				}
				if _, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok || s.Annotations["keep"] != "y" {
					t.Errorf("slice %d annotations: %v", i, s.Annotations)
				}
				if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "u1" || !*s.OwnerReferences[0].Controller {
					t.Errorf("slice %d owners: %v", i, s.OwnerReferences)
				}
			}
			if ep.Labels[discoveryv1.LabelManagedBy] != "" {
				t.Error("the Endpoints' labels were changed")
			}
		})
	}
}

func TestMirrored(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want bool
	}{
		{"plain", metav1.ObjectMeta{}, true},
		{"skip-mirror", metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}}, false},
		{"skip-mirror false", metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelSkipMirror: "false"}}, true},
		{"leader election lock", metav1.ObjectMeta{Annotations: map[string]string{leaderAnnotation: "{}"}}, false},
	} {
		if got := mirrored(&corev1.Endpoints{ObjectMeta: tc.meta}); got != tc.want {
			t.Errorf("%s: mirrored = %v, want %v", tc.name, got, tc.want)
		}
	}
}
