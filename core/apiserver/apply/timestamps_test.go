package apply

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestSemanticallyEqual checks the field-by-field comparison against
// apiequality.Semantic.DeepEqual on objects that differ in each part.
func TestSemanticallyEqual(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{"f"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}, FirstTimestamp: metav1.NewTime(time.Unix(100, 0))}
	for _, tc := range []struct {
		name string
		a, b runtime.Object
	}{
		{"equal", base(), base()},
		{"metadata", base(), func() runtime.Object { p := base(); p.Finalizers = nil; return p }()},
		{"spec", base(), func() runtime.Object { p := base(); p.Spec.Containers[0].Name = "other"; return p }()},
		{"status", base(), func() runtime.Object { p := base(); p.Status.Phase = corev1.PodSucceeded; return p }()},
		{"type meta", base(), func() runtime.Object { p := base(); p.Kind = "Pod"; return p }()},
		{"quantities equal in value", base(), func() runtime.Object {
			p := base()
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1000m")
			return p
		}()},
		{"nil and empty", base(), func() runtime.Object { p := base(); p.Spec.Volumes = []corev1.Volume{}; return p }()},
		{"top-level time, equal", event, event.DeepCopy()},
		{"top-level time, different", event, func() runtime.Object {
			e := event.DeepCopy()
			e.FirstTimestamp = metav1.NewTime(time.Unix(200, 0))
			return e
		}()},
		{"different types", base(), event},
		{"unstructured", &unstructured.Unstructured{Object: map[string]any{"a": int64(1)}}, &unstructured.Unstructured{Object: map[string]any{"a": int64(2)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := semanticallyEqual(tc.a, tc.b), equality.Semantic.DeepEqual(tc.a, tc.b); got != want {
				t.Errorf("semanticallyEqual = %v, apiequality.Semantic.DeepEqual = %v", got, want)
			}
		})
	}
}

// BenchmarkPodEqual compares a pod with its copy after a readiness flip (what a status
// write changes), in apiequality.Semantic.DeepEqual's field order and in
// semanticallyEqual's.
func BenchmarkPodEqual(b *testing.B) {
	now := metav1.NewTime(time.Unix(100, 0))
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web", "pod-template-hash": "abc"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "0123"}}},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "app", Image: "app:1",
			Ports:     []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:       []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}}
	flipped := old.DeepCopy()
	flipped.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, tc := range []struct {
		name  string
		equal func(a, b runtime.Object) bool
	}{
		{"DeepEqual", func(a, b runtime.Object) bool { return equality.Semantic.DeepEqual(a, b) }},
		{"semanticallyEqual", semanticallyEqual},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if tc.equal(flipped, old) {
					b.Fatal("equal")
				}
			}
		})
	}
}
