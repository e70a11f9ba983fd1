package openapi

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testScheme mirrors what wasmplane registers (core/api.NewScheme) without depending on it.
func testScheme(tb testing.TB) *runtime.Scheme {
	tb.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv1.AddToScheme,
		coordinationv1.AddToScheme, eventsv1.AddToScheme, policyv1.AddToScheme, metav1.AddMetaToScheme,
	} {
		if err := add(s); err != nil {
			tb.Fatal(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

func core(kind string) schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind(kind) }
func apps(kind string) schema.GroupVersionKind { return appsv1.SchemeGroupVersion.WithKind(kind) }

// testResources is the ~15 resources wasmplane serves.
func testResources() []Resource {
	scale := Subresource{Name: "scale", Kind: autoscalingv1.SchemeGroupVersion.WithKind("Scale")}
	status := Subresource{Name: "status"}
	return []Resource{
		{GVK: core("Namespace"), Plural: "namespaces", Subresources: []Subresource{status, {Name: "finalize", Verbs: []string{"update"}}}},
		{GVK: core("Node"), Plural: "nodes", Subresources: []Subresource{status}},
		{GVK: core("Pod"), Plural: "pods", Namespaced: true, Subresources: []Subresource{
			status,
			{Name: "binding", Kind: core("Binding")},
			{Name: "log"},
			{Name: "eviction", Kind: policyv1.SchemeGroupVersion.WithKind("Eviction")},
		}},
		{GVK: core("ConfigMap"), Plural: "configmaps", Namespaced: true},
		{GVK: core("Secret"), Plural: "secrets", Namespaced: true},
		{GVK: core("ServiceAccount"), Plural: "serviceaccounts", Namespaced: true},
		{GVK: core("Service"), Plural: "services", Namespaced: true, Subresources: []Subresource{status}},
		{GVK: core("Endpoints"), Plural: "endpoints", Namespaced: true},
		{GVK: core("Event"), Plural: "events", Namespaced: true},
		{GVK: core("PersistentVolumeClaim"), Plural: "persistentvolumeclaims", Namespaced: true, Subresources: []Subresource{status}},
		{GVK: apps("Deployment"), Plural: "deployments", Namespaced: true, Subresources: []Subresource{status, scale}},
		{GVK: apps("ReplicaSet"), Plural: "replicasets", Namespaced: true, Subresources: []Subresource{status, scale}},
		{GVK: apps("StatefulSet"), Plural: "statefulsets", Namespaced: true, Subresources: []Subresource{status, scale}},
		{GVK: apps("DaemonSet"), Plural: "daemonsets", Namespaced: true, Subresources: []Subresource{status}},
		{GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Plural: "leases", Namespaced: true},
		{GVK: eventsv1.SchemeGroupVersion.WithKind("Event"), Plural: "events", Namespaced: true},
	}
}
