package plugins

import (
	"context"
	"maps"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRuntimeClass(t *testing.T) {
	gpu := nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m", "memory", "64Mi")},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "gvisor"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	plain := nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}
	tests := []struct {
		name         string
		class        string
		selector     map[string]string
		tolerations  []corev1.Toleration
		overhead     corev1.ResourceList
		wantErr      string
		wantSelector map[string]string
		wantTols     int
		wantOverhead corev1.ResourceList
	}{
		{name: "no class"},
		{name: "missing class", class: "ghost", wantErr: `pods "p" is forbidden: pod rejected: RuntimeClass "ghost" not found`},
		{name: "class without extras", class: "runc"},
		{name: "overhead and scheduling merged", class: "gvisor", selector: map[string]string{"zone": "a"},
			tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}},
			wantSelector: map[string]string{"zone": "a", "runtime": "gvisor"}, wantTols: 1, wantOverhead: gpu.Overhead.PodFixed},
		{name: "selector conflict", class: "gvisor", selector: map[string]string{"runtime": "kata"},
			wantErr: `pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; pod.spec.nodeSelector[runtime] = kata`},
		{name: "own overhead differs", class: "gvisor", overhead: rl("cpu", "1"),
			wantErr: `pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`},
		{name: "overhead without a class", overhead: rl("cpu", "1"),
			wantErr: `pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod()
			if tt.class != "" {
				p.Spec.RuntimeClassName = ptr.To(tt.class)
			}
			p.Spec.NodeSelector, p.Spec.Tolerations, p.Spec.Overhead = maps.Clone(tt.selector), tt.tolerations, tt.overhead
			plugin := &RuntimeClass{Classes: &fakeReader{runtimes: []nodev1.RuntimeClass{gpu, plain}}}
			a := attrs(admission.Create, "pods", p)
			err := plugin.Admit(context.Background(), a)
			if err == nil {
				err = plugin.Validate(context.Background(), a)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(p.Spec.NodeSelector, tt.wantSelector) || len(p.Spec.Tolerations) != tt.wantTols ||
				!apiequality.Semantic.DeepEqual(p.Spec.Overhead, tt.wantOverhead) {
				t.Errorf("got selector %v, %d tolerations, overhead %v", p.Spec.NodeSelector, len(p.Spec.Tolerations), p.Spec.Overhead)
			}
		})
	}
}

func TestMergeTolerations(t *testing.T) {
	exists := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}
	equal := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Toleration{Key: "o", Operator: corev1.TolerationOpExists}
	short := corev1.Toleration{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)}
	long := corev1.Toleration{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](100)}
	for _, tc := range []struct {
		name          string
		first, second []corev1.Toleration
		want          []corev1.Toleration
	}{
		{name: "union", first: []corev1.Toleration{equal}, second: []corev1.Toleration{other}, want: []corev1.Toleration{equal, other}},
		{name: "covered dropped", first: []corev1.Toleration{equal}, second: []corev1.Toleration{exists}, want: []corev1.Toleration{exists}},
		{name: "duplicates once", first: []corev1.Toleration{other}, second: []corev1.Toleration{other}, want: []corev1.Toleration{other}},
		{name: "the longer NoExecute wins", first: []corev1.Toleration{short}, second: []corev1.Toleration{long}, want: []corev1.Toleration{long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeTolerations(tc.first, tc.second); !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
