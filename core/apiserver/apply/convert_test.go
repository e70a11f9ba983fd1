package apply

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// TestVersionedConvertor checks that the field managers' conversion answers what the
// scheme's does, and that it neither copies an object needlessly nor modifies its input.
func TestVersionedConvertor(t *testing.T) {
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	pod := func(gvk schema.GroupVersionKind) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
		p.SetGroupVersionKind(gvk)
		return p
	}
	unstructuredPod := func() runtime.Object {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod(podGVK))
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: u}
	}
	for _, tc := range []struct {
		name     string
		in       func() runtime.Object
		target   runtime.GroupVersioner
		wantSame bool // the input itself is the answer
		wantErr  bool
	}{
		{name: "typed, kind set", in: func() runtime.Object { return pod(podGVK) }, target: corev1.SchemeGroupVersion, wantSame: true},
		{name: "typed, kind unset", in: func() runtime.Object { return pod(schema.GroupVersionKind{}) }, target: corev1.SchemeGroupVersion},
		{name: "unstructured", in: unstructuredPod, target: corev1.SchemeGroupVersion},
		{name: "typed, other group", in: func() runtime.Object { return pod(podGVK) }, target: appsv1.SchemeGroupVersion, wantErr: true},
		{name: "unstructured of an unknown kind", in: func() runtime.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
			return u
		}, target: corev1.SchemeGroupVersion, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			before := in.DeepCopyObject()
			want, wantErr := clientgoscheme.Scheme.ConvertToVersion(tc.in(), tc.target)
			got, err := versionedConvertor{scheme: clientgoscheme.Scheme}.ConvertToVersion(in, tc.target)
			if (err != nil) != tc.wantErr || (wantErr != nil) != tc.wantErr {
				t.Fatalf("error = %v, scheme's error = %v, want an error: %v", err, wantErr, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("got %#v, the scheme answers %#v", got, want)
			}
			if !equality.Semantic.DeepEqual(in, before) {
				t.Errorf("the input was modified: %#v, was %#v", in, before)
			}
			if same := got == in; same != tc.wantSame {
				t.Errorf("answer is the input: %v, want %v", same, tc.wantSame)
			}
		})
	}
}

// BenchmarkPodStatusUpdate records managedFields for a pod status write (a readiness
// flip) with the scheme's conversion and with the field managers' own.
func BenchmarkPodStatusUpdate(b *testing.B) {
	scheme := clientgoscheme.Scheme
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	now := metav1.Now()
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.1", Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true}}}}
	for _, tc := range []struct {
		name string
		conv runtime.ObjectConvertor
	}{{"scheme", scheme}, {"versioned", versionedConvertor{scheme: scheme}}} {
		b.Run(tc.name, func(b *testing.B) {
			reset := map[fieldpath.APIVersion]fieldpath.Filter{"v1": fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("spec")))}
			fm, err := managedfields.NewDefaultFieldManager(NewTypeConverter(scheme), tc.conv, scheme, scheme, gvk, gvk.GroupVersion(), Status, reset)
			if err != nil {
				b.Fatal(err)
			}
			cur := fm.UpdateNoErrors(&corev1.Pod{}, live.DeepCopy(), "kubelet").(*corev1.Pod)
			for i := 0; b.Loop(); i++ {
				cur = fm.UpdateNoErrors(cur, flipReadiness(cur, i), "kubelet").(*corev1.Pod)
				if len(cur.ManagedFields) != 1 {
					b.Fatalf("managedFields: %v", cur.ManagedFields)
				}
			}
		})
	}
}
