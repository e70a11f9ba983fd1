package aggregator

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
)

func lookupOf(objs ...runtime.Object) LookupFunc {
	return func(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
		for _, o := range objs {
			m := o.(metav1.Object)
			_, isSvc := o.(*corev1.Service)
			if m.GetNamespace() == ns && m.GetName() == name && isSvc == (gr.Resource == "services") {
				return o, nil
			}
		}
		return nil, apierrors.NewNotFound(gr, name)
	}
}

func TestResolve(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "api"}
	clusterIP := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
	external := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.example.com"}}
	ready := &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.7"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 8443}}}}}
	otherPort := &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.7"}}, Ports: []corev1.EndpointPort{{Name: "metrics", Port: 9090}}}}}
	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		port       *int32
		wantHost   string
		wantReason string
	}{
		{"no Service", nil, nil, "", ReasonServiceNotFound},
		{"port not served", []runtime.Object{clusterIP, ready}, ptr.To[int32](8080), "", ReasonServicePortError},
		{"no Endpoints", []runtime.Object{clusterIP}, nil, "", ReasonEndpointsNotFound},
		{"no address on the port", []runtime.Object{clusterIP, otherPort}, nil, "", ReasonMissingEndpoints},
		{"ready endpoint", []runtime.Object{clusterIP, ready}, nil, "10.0.0.7:8443", ""},
		{"ExternalName", []runtime.Object{external}, ptr.To[int32](6443), "api.example.com:6443", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Config{Lookup: lookupOf(tc.objs...)})
			u, cond := a.resolve(context.Background(), &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "api", Port: tc.port})
			if tc.wantHost != "" {
				if u == nil || u.Host != tc.wantHost || u.Scheme != "https" {
					t.Fatalf("resolved %v (%+v), want https://%s", u, cond, tc.wantHost)
				}
				return
			}
			if u != nil || cond.Reason != tc.wantReason || cond.Status != apiregistrationv1.ConditionFalse || !strings.Contains(cond.Message, `"ns"`) {
				t.Errorf("resolved %v, condition %+v, want reason %s", u, cond, tc.wantReason)
			}
		})
	}
}

func TestSetAPIServices(t *testing.T) {
	a := New(Config{Lookup: lookupOf()})
	remote := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.remote.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "remote.example.com", Version: "v1", InsecureSkipTLSVerify: true,
			Service: &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "api"}}}
	local := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"}, Spec: apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"}}
	badCA := remote.DeepCopy()
	badCA.Spec.InsecureSkipTLSVerify, badCA.Spec.CABundle = false, []byte("not a certificate")
	gv := schema.GroupVersion{Group: "remote.example.com", Version: "v1"}
	for _, tc := range []struct {
		name       string
		services   []*apiregistrationv1.APIService
		wantTarget bool
		wantGen    uint64
		wantReason string
	}{
		{"a local APIService is no target", []*apiregistrationv1.APIService{local}, false, 0, ""},
		{"one naming a Service is", []*apiregistrationv1.APIService{local, remote}, true, 1, ReasonFailedDiscoveryCheck},
		{"the same again changes nothing", []*apiregistrationv1.APIService{remote, local}, true, 1, ReasonFailedDiscoveryCheck},
		{"a bad caBundle is reported", []*apiregistrationv1.APIService{badCA}, true, 2, ReasonServiceAccessError},
		{"removed", nil, false, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.SetAPIServices(tc.services)
			if a.Handles(gv) != tc.wantTarget {
				t.Errorf("Handles = %v, want %v", a.Handles(gv), tc.wantTarget)
			}
			if gen, _ := a.Generation(); gen != tc.wantGen {
				t.Errorf("generation %d, want %d", gen, tc.wantGen)
			}
			if c, ok := a.Condition(remote.Name, gv); ok != tc.wantTarget || c.Reason != tc.wantReason {
				t.Errorf("condition %+v (%v), want reason %q", c, ok, tc.wantReason)
			}
		})
	}
}
