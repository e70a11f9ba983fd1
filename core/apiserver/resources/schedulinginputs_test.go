package resources

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// schedulingInput returns the definition of the named resource.
func schedulingInput(t *testing.T, name string) Definition {
	t.Helper()
	for _, d := range SchedulingInputs() {
		if d.Resource.Name == name {
			return d
		}
	}
	t.Fatalf("no resource %q", name)
	return Definition{}
}

func TestSchedulingInputsStatus(t *testing.T) {
	// Kubernetes has a status subresource for these; kube-scheduler and controllers write it.
	for _, name := range []string{"services", "replicationcontrollers", "persistentvolumes", "persistentvolumeclaims",
		"statefulsets", "volumeattachments", "poddisruptionbudgets", "resourceclaims", "devicetaintrules"} {
		d := schedulingInput(t, name)
		if d.Subresources == nil || d.Resource.StatusStrategy == nil {
			t.Errorf("%s: no status subresource", name)
		}
	}
	for _, name := range []string{"storageclasses", "csinodes", "csidrivers", "resourceslices", "deviceclasses"} {
		if d := schedulingInput(t, name); d.Subresources != nil {
			t.Errorf("%s: unexpected subresources", name)
		}
	}
}

func TestSchedulingInputsValidation(t *testing.T) {
	storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	tests := []struct {
		name, resource string
		obj            runtime.Object
		want           string
	}{
		{"service", "services", &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, ""},
		{"service no ports", "services", &corev1.Service{}, "spec.ports:FieldValueRequired"},
		{"service bad port", "services", &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 70000}}}},
			"spec.ports[0].port:FieldValueInvalid"},
		{"headless", "services", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}, ""},
		{"pvc", "persistentvolumeclaims", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo,
			Resources: corev1.VolumeResourceRequirements{Requests: storage}}}, ""},
		{"pvc no size", "persistentvolumeclaims", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo}},
			"spec.resources.requests[storage]:FieldValueRequired"},
		{"pv no modes", "persistentvolumes", &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: storage}},
			"spec.accessModes:FieldValueRequired"},
		{"pdb both", "poddisruptionbudgets", &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("50%"))}}, "spec:FieldValueInvalid"},
		{"pdb negative", "poddisruptionbudgets", &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(-1))}}, "spec.minAvailable:FieldValueInvalid"},
		{"storageclass", "storageclasses", &storagev1.StorageClass{}, "provisioner:FieldValueRequired"},
		{"statefulset selector", "statefulsets", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i:1"}}}}}},
			"spec.template.metadata.labels:FieldValueInvalid"},
		{"slice no node choice", "resourceslices", &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "p"}}}, "spec:FieldValueRequired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := schedulingInput(t, tt.resource).Resource.Strategy
			st.Default(tt.obj)
			st.PrepareForCreate(context.Background(), tt.obj)
			if got := errFields(st.Validate(context.Background(), tt.obj)); got != tt.want {
				t.Errorf("errors = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServiceDefaults(t *testing.T) {
	s := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	defaultService(s)
	p := s.Spec.Ports[0]
	if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		p.Protocol != corev1.ProtocolTCP || p.TargetPort != intstr.FromInt32(80) {
		t.Errorf("defaults = %+v", s.Spec)
	}
}
