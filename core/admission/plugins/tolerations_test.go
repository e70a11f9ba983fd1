package plugins

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	notReady := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}
	unreachable := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}
	own := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(10))}
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	tests := []struct {
		name string
		have []corev1.Toleration
		want []corev1.Toleration
	}{
		{name: "none", want: []corev1.Toleration{notReady, unreachable}},
		{name: "own not-ready kept", have: []corev1.Toleration{own}, want: []corev1.Toleration{own, unreachable}},
		{name: "tolerate everything", have: []corev1.Toleration{all}, want: []corev1.Toleration{all}},
		{name: "both present", have: []corev1.Toleration{notReady, unreachable}, want: []corev1.Toleration{notReady, unreachable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod()
			p.Spec.Tolerations = tt.have
			if err := (DefaultTolerationSeconds{}).Admit(context.Background(), attrs(admission.Create, "pods", p)); err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(p.Spec.Tolerations, tt.want) {
				t.Fatalf("tolerations = %+v, want %+v", p.Spec.Tolerations, tt.want)
			}
		})
	}
}
