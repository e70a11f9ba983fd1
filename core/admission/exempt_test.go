package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestIsAdmissionConfiguration lists what dynamic plugins and initializers never see.
func TestIsAdmissionConfiguration(t *testing.T) {
	tests := []struct {
		gr   schema.GroupResource
		want bool
	}{
		{schema.GroupResource{Group: "wasmplane.io", Resource: "wasmplugins"}, true},
		{schema.GroupResource{Group: "wasmplane.io", Resource: "clusterwasmplugins"}, true},
		{schema.GroupResource{Group: "wasmplane.io", Resource: "wasmmodules"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "initializerconfigurations"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}, true},
		{schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}, true},
		{schema.GroupResource{Resource: "pods"}, false},
		{schema.GroupResource{Resource: "namespaces"}, false},
		{schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, false},
		{schema.GroupResource{Group: "example.io", Resource: "wasmplugins"}, false},
	}
	for _, tt := range tests {
		if got := IsAdmissionConfiguration(tt.gr); got != tt.want {
			t.Errorf("IsAdmissionConfiguration(%s) = %v, want %v", tt.gr, got, tt.want)
		}
	}
}

// TestIsCleanup covers which control-plane requests tenant plugins never see.
func TestIsCleanup(t *testing.T) {
	withFinalizers := func(labels map[string]string, fs ...string) runtime.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a", ResourceVersion: "5", Labels: labels, Finalizers: fs}}
	}
	released := withFinalizers(nil, "a.example.com")
	released.(*corev1.ConfigMap).ResourceVersion = "6"
	tests := []struct {
		name     string
		user     string
		op       Operation
		old, obj runtime.Object
		want     bool
	}{
		{name: "loopback delete", user: "system:apiserver", op: Delete, old: withFinalizers(nil), want: true},
		{name: "controller manager delete", user: "system:kube-controller-manager", op: Delete, want: true},
		{name: "namespace controller account delete", user: "system:serviceaccount:kube-system:namespace-controller", op: Delete, want: true},
		{name: "garbage collector account delete", user: "system:serviceaccount:kube-system:generic-garbage-collector", op: Delete, want: true},
		{name: "admin delete", user: "system:admin", op: Delete},
		{name: "tenant delete", user: "alice", op: Delete},
		{name: "a tenant's service account named alike", user: "system:serviceaccount:tenant-a:namespace-controller", op: Delete},
		{name: "loopback create", user: "system:apiserver", op: Create, obj: withFinalizers(nil)},
		{name: "finalizer removed", user: "system:apiserver", op: Update,
			old: withFinalizers(nil, "a.example.com", "foregroundDeletion"), obj: released, want: true},
		{name: "finalizer removed by a tenant", user: "alice", op: Update,
			old: withFinalizers(nil, "a.example.com", "foregroundDeletion"), obj: released},
		{name: "finalizer removed and labels changed", user: "system:apiserver", op: Update,
			old: withFinalizers(nil, "a.example.com", "foregroundDeletion"), obj: withFinalizers(map[string]string{"x": "y"}, "a.example.com")},
		{name: "finalizer swapped", user: "system:apiserver", op: Update,
			old: withFinalizers(nil, "a.example.com", "foregroundDeletion"), obj: withFinalizers(nil, "b.example.com")},
		{name: "finalizer added", user: "system:apiserver", op: Update,
			old: withFinalizers(nil), obj: withFinalizers(nil, "a.example.com")},
		{name: "ordinary update", user: "system:apiserver", op: Update, old: withFinalizers(nil), obj: withFinalizers(map[string]string{"x": "y"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Attributes{Operation: tt.op, User: UserInfo{Name: tt.user}, OldObject: tt.old, Object: tt.obj}
			if got := IsCleanup(a); got != tt.want {
				t.Fatalf("IsCleanup = %v, want %v", got, tt.want)
			}
		})
	}
}
