package endpoint

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(name, ip string, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func addrs(as []corev1.EndpointAddress) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.IP+"/"+a.TargetRef.Name)
	}
	return out
}

func TestSubsets(t *testing.T) {
	named := &corev1.Service{Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		Ports: []corev1.ServicePort{{Name: "web", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}}}
	tests := []struct {
		name           string
		svc            *corev1.Service
		pods           []*corev1.Pod
		ready, unready []string
		port           int32
		subsets        int
	}{
		{name: "ready and not ready, named port resolved", svc: named, port: 8080, subsets: 1,
			pods:  []*corev1.Pod{pod("b", "10.0.0.2", true), pod("a", "10.0.0.1", true), pod("c", "10.0.0.3", false)},
			ready: []string{"10.0.0.1/a", "10.0.0.2/b"}, unready: []string{"10.0.0.3/c"}},
		{name: "no IP yet, terminal and deleted pods are left out", svc: named, port: 8080, subsets: 1,
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true), pod("noip", "", true),
				pod("done", "10.0.0.4", false, func(p *corev1.Pod) {
					p.Spec.RestartPolicy, p.Status.Phase = corev1.RestartPolicyNever, corev1.PodSucceeded
				}),
				pod("going", "10.0.0.5", true, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
			ready: []string{"10.0.0.1/a"}},
		{name: "publishNotReadyAddresses", port: 8080, subsets: 1,
			svc:  func() *corev1.Service { s := named.DeepCopy(); s.Spec.PublishNotReadyAddresses = true; return s }(),
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true), pod("c", "10.0.0.3", false)}, ready: []string{"10.0.0.1/a", "10.0.0.3/c"}},
		{name: "a pod without the named port is left out", svc: named, port: 8080, subsets: 1,
			pods:  []*corev1.Pod{pod("a", "10.0.0.1", true), pod("x", "10.0.0.9", true, func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil })},
			ready: []string{"10.0.0.1/a"}},
		{name: "headless without ports", subsets: 1,
			svc:  &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
			pods: []*corev1.Pod{pod("a", "10.0.0.1", true)}, ready: []string{"10.0.0.1/a"}},
		{name: "pods sharing the node's IP stay apart", svc: named, port: 8080, subsets: 1,
			pods:  []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.1", true)},
			ready: []string{"10.0.0.1/a", "10.0.0.1/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ss := Subsets(tc.svc, tc.pods)
			if len(ss) != tc.subsets {
				t.Fatalf("%d subsets: %+v", len(ss), ss)
			}
			if got := addrs(ss[0].Addresses); !slices.Equal(got, tc.ready) {
				t.Errorf("ready %v, want %v", got, tc.ready)
			}
			if got := addrs(ss[0].NotReadyAddresses); !slices.Equal(got, tc.unready) {
				t.Errorf("not ready %v, want %v", got, tc.unready)
			}
			if tc.port != 0 && (len(ss[0].Ports) != 1 || ss[0].Ports[0].Port != tc.port || ss[0].Ports[0].Name != "web") {
				t.Errorf("ports %+v", ss[0].Ports)
			}
			for _, a := range ss[0].Addresses {
				if a.NodeName == nil || *a.NodeName != "n1" || a.TargetRef.Kind != "Pod" || a.TargetRef.Namespace != "ns" {
					t.Errorf("address %+v", a)
				}
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	e := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{
		Addresses: make([]corev1.EndpointAddress, 900), NotReadyAddresses: make([]corev1.EndpointAddress, 300)}}}
	if !truncate(e) {
		t.Fatal("1200 addresses not truncated")
	}
	if len(e.Subsets[0].Addresses) != 900 || len(e.Subsets[0].NotReadyAddresses) != 100 {
		t.Fatalf("kept %d ready, %d not ready", len(e.Subsets[0].Addresses), len(e.Subsets[0].NotReadyAddresses))
	}
	if truncate(e) {
		t.Fatal("1000 addresses truncated")
	}
}
