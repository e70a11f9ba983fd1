package registry

import (
	"slices"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/api/initializers"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestDeleteFinalizers(t *testing.T) {
	orphan, fg, bg := metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground, metav1.DeletePropagationBackground
	tests := []struct {
		name     string
		existing []string
		opts     metav1.DeleteOptions
		orphan   bool // the resource orphans by default
		want     []string
	}{
		{"background default", []string{"x"}, metav1.DeleteOptions{}, false, []string{"x"}},
		{"background explicit", nil, metav1.DeleteOptions{PropagationPolicy: &bg}, false, nil},
		{"orphan", nil, metav1.DeleteOptions{PropagationPolicy: &orphan}, false, []string{FinalizerOrphan}},
		{"legacy orphanDependents", nil, metav1.DeleteOptions{OrphanDependents: ptr.To(true)}, false, []string{FinalizerOrphan}},
		{"foreground replaces orphan", []string{FinalizerOrphan}, metav1.DeleteOptions{PropagationPolicy: &fg}, false, []string{FinalizerForeground}},
		{"no duplicate", []string{FinalizerForeground}, metav1.DeleteOptions{PropagationPolicy: &fg}, false, []string{FinalizerForeground}},
		{"orphan by default", []string{"x"}, metav1.DeleteOptions{}, true, []string{"x", FinalizerOrphan}},
		{"orphan by default, background asked", nil, metav1.DeleteOptions{PropagationPolicy: &bg}, true, nil},
		{"orphan by default, orphanDependents false", nil, metav1.DeleteOptions{OrphanDependents: ptr.To(false)}, true, nil},
		{"orphan by default, foreground already set", []string{FinalizerForeground}, metav1.DeleteOptions{}, true, []string{FinalizerForeground}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deleteFinalizers(tt.existing, &tt.opts, tt.orphan); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGenerateName(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := generateName("web-")
		if !strings.HasPrefix(n, "web-") || len(n) != len("web-")+5 {
			t.Fatalf("bad generated name %q", n)
		}
		seen[n] = true
	}
	if len(seen) < 95 {
		t.Errorf("only %d distinct names in 100 draws", len(seen))
	}
	if n := generateName(strings.Repeat("a", 80)); len(n) != 63 {
		t.Errorf("long base: %d characters, want 63", len(n))
	}
}

func TestSpecChanged(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   bool
	}{
		{"nothing", func(*appsv1.Deployment) {}, false},
		{"labels", func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"} }, false},
		{"status", func(d *appsv1.Deployment) { d.Status.Replicas = 3 }, false},
		{"spec", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := d.DeepCopy()
			tt.mutate(n)
			if got := specChanged(n, d); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStorageAttrsAndHiding(t *testing.T) {
	res := &Resource{Namespaced: true}
	attrs := StorageAttrs(res)
	sel := hideUninitialized(fields.Everything())
	for _, tt := range []struct {
		name    string
		pending string
		visible bool
		custom  bool
	}{
		{"initialized", "", true, false},
		{"pending", "podimage.example.com", false, false},
		{"custom object initialized", "", true, true},
		{"custom object pending", "a.example.com,b.example.com", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p runtime.Object = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
			if tt.pending != "" {
				p.(*corev1.Pod).Annotations = map[string]string{initializers.PendingAnnotation: tt.pending}
			}
			if tt.custom {
				md := map[string]any{"name": "p", "namespace": "ns", "annotations": map[string]any{"other": "x"}}
				if tt.pending != "" {
					md["annotations"].(map[string]any)[initializers.PendingAnnotation] = tt.pending
				}
				p = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md}}
			}
			_, f, err := attrs(p)
			if err != nil {
				t.Fatal(err)
			}
			if f["metadata.name"] != "p" || f["metadata.namespace"] != "ns" {
				t.Errorf("default fields missing: %v", f)
			}
			if got := sel.Matches(f); got != tt.visible {
				t.Errorf("visible %v, want %v (fields %v)", got, tt.visible, f)
			}
			got := PendingInitializers(p)
			if (len(got) > 0) == tt.visible || (tt.pending != "" && strings.Join(got, ",") != tt.pending) {
				t.Errorf("PendingInitializers = %v, want %q", got, tt.pending)
			}
		})
	}
	// A client's own field selector is kept alongside.
	both := hideUninitialized(fields.OneTermEqualSelector("metadata.name", "q"))
	if both.Matches(fields.Set{"metadata.name": "p", "metadata.initialized": "true"}) {
		t.Error("the client's selector was dropped")
	}
}
