package plugins

import (
	"context"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// DefaultTolerationSecondsValue is how long a pod stays bound to a not-ready or
// unreachable node before it is evicted (Kubernetes' default 300 s).
const DefaultTolerationSecondsValue = int64(300)

// DefaultTolerationSeconds is Kubernetes' plugin of that name: every pod tolerates the
// not-ready and unreachable NoExecute taints for five minutes unless it says otherwise.
type DefaultTolerationSeconds struct{}

// Name implements admission.Mutator.
func (DefaultTolerationSeconds) Name() string { return "DefaultTolerationSeconds" }

// Admit adds the missing tolerations on pod create and update.
func (DefaultTolerationSeconds) Admit(_ context.Context, a *admission.Attributes) error {
	if !isPod(a) || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		noExecute := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		if (t.Key == corev1.TaintNodeNotReady || t.Key == "") && noExecute {
			notReady = true
		}
		if (t.Key == corev1.TaintNodeUnreachable || t.Key == "") && noExecute {
			unreachable = true
		}
	}
	if !notReady {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeNotReady,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(DefaultTolerationSecondsValue)})
	}
	if !unreachable {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeUnreachable,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(DefaultTolerationSecondsValue)})
	}
	return nil
}
