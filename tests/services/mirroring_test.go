package services_test

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/endpointslicemirroring"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// mirroredAddresses lists the addresses of the slices mirrored for a Service, with their
// ready condition, and the number of slices.
func mirroredAddresses(ctx context.Context, cs kubernetes.Interface, ns, svc string) (map[string]bool, int, error) {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, 0, err
	}
	got := map[string]bool{}
	for _, s := range l.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != endpointslicemirroring.ControllerName {
			return nil, 0, fmt.Errorf("slice %s managed by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				got[a] = e.Conditions.Ready != nil && *e.Conditions.Ready
			}
		}
	}
	return got, len(l.Items), nil
}

// TestEndpointsMirroredToSlices writes the Endpoints of a Service without a selector by
// hand, as people do for external backends, and follows their EndpointSlices through
// create, update, skip-mirror and delete.
func TestEndpointsMirroredToSlices(t *testing.T) {
	s := testserver.Start(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	svc := service("external", "")
	svc.Spec.Selector = nil
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "external", Labels: map[string]string{"team": "a"}},
		Subsets: []corev1.EndpointSubset{{
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080}},
			Addresses:         []corev1.EndpointAddress{{IP: "10.1.2.3"}, {IP: "fd00::1"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.4"}},
		}}}
	eps, err := cs.CoreV1().Endpoints("default").Create(ctx, eps, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want map[string]bool, slices int) {
		t.Helper()
		waitfor.Condition(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
			got, n, err := mirroredAddresses(ctx, cs, "default", "external")
			if err != nil || n != slices || len(got) != len(want) {
				return false, err
			}
			for a, ready := range want {
				if r, ok := got[a]; !ok || r != ready {
					return false, nil
				}
			}
			return true, nil
		})
	}
	// One slice per address family.
	expect("mirrored on create", map[string]bool{"10.1.2.3": true, "10.1.2.4": false, "fd00::1": true}, 2)
	l, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=external"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range l.Items {
		if sl.Labels["team"] != "a" || len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != eps.UID ||
			len(sl.Ports) != 1 || *sl.Ports[0].Port != 8080 || *sl.Ports[0].Name != "http" {
			t.Errorf("slice %s: labels %v owners %v ports %v", sl.Name, sl.Labels, sl.OwnerReferences, sl.Ports)
		}
	}

	eps.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "10.2.3.4"}}
	eps.Subsets[0].NotReadyAddresses = nil
	if eps, err = cs.CoreV1().Endpoints("default").Update(ctx, eps, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("mirrored on update, the IPv6 slice gone", map[string]bool{"10.2.3.4": true}, 1)

	eps.Labels[discoveryv1.LabelSkipMirror] = "true"
	if _, err = cs.CoreV1().Endpoints("default").Update(ctx, eps, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("no slices once skip-mirror is set", map[string]bool{}, 0)
	eps, err = cs.CoreV1().Endpoints("default").Get(ctx, "external", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(eps.Labels, discoveryv1.LabelSkipMirror)
	if _, err = cs.CoreV1().Endpoints("default").Update(ctx, eps, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("mirrored again", map[string]bool{"10.2.3.4": true}, 1)

	if err := cs.CoreV1().Endpoints("default").Delete(ctx, "external", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slices gone with the Endpoints", map[string]bool{}, 0)
}
