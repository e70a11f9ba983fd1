package plugins

import (
	"context"
	"fmt"
	"maps"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RuntimeClassGetter reads RuntimeClasses.
type RuntimeClassGetter interface {
	// GetRuntimeClass returns one class; a NotFound error when it is missing.
	GetRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
}

// RuntimeClass is Kubernetes' plugin of that name: a new pod naming a RuntimeClass is
// refused when the class does not exist, and otherwise gets the class's pod overhead and
// its scheduling constraints (node selector and tolerations) merged into its own, so that
// the scheduler places it only where the runtime is.
type RuntimeClass struct {
	// Classes reads RuntimeClasses.
	Classes RuntimeClassGetter
}

// Name implements admission.Mutator and admission.Validator.
func (*RuntimeClass) Name() string { return "RuntimeClass" }

// Admit sets a new pod's overhead and merges its class's scheduling constraints.
func (r *RuntimeClass) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := r.prepare(ctx, a)
	if err != nil || pod == nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if s := rc.Scheduling; s != nil {
		selector := pod.Spec.NodeSelector
		if selector == nil {
			selector = maps.Clone(s.NodeSelector)
		} else {
			for k, v := range s.NodeSelector {
				if pv, ok := selector[k]; ok && pv != v {
					return forbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, pv))
				}
				selector[k] = v
			}
		}
		pod.Spec.NodeSelector = selector
		pod.Spec.Tolerations = MergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	}
	return nil
}

// Validate checks, after every mutation, that the pod's overhead is its class's: no
// other plugin or webhook may have changed it.
func (r *RuntimeClass) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := r.prepare(ctx, a)
	if err != nil || pod == nil {
		return err
	}
	if rc != nil && rc.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return forbidden(a, fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

// prepare returns the pod of a pod create and its RuntimeClass (nil when it names none);
// a nil pod means the request is not one the plugin looks at.
func (r *RuntimeClass) prepare(ctx context.Context, a *admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	if !isPod(a) || a.Operation != admission.Create {
		return nil, nil, nil
	}
	pod, err := podOf(a)
	if err != nil || pod.Spec.RuntimeClassName == nil {
		return pod, nil, err
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := r.Classes.GetRuntimeClass(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, nil, forbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading RuntimeClass %q: %w", name, err)
	}
	return pod, rc, nil
}

// MergeTolerations joins two toleration lists as Kubernetes does, dropping each
// toleration another one in the result already covers (equal ones keep the first).
func MergeTolerations(first, second []corev1.Toleration) []corev1.Toleration {
	all := append(append([]corev1.Toleration{}, first...), second...)
	var merged []corev1.Toleration
next:
	for i, t := range all {
		for _, m := range merged {
			if tolerationCovers(m, t) {
				continue next
			}
		}
		for _, later := range all[i+1:] {
			if !apiequality.Semantic.DeepEqual(t, later) && tolerationCovers(later, t) {
				continue next
			}
		}
		merged = append(merged, t)
	}
	return merged
}

// tolerationCovers reports whether every taint t tolerates, ss tolerates as well (and
// for NoExecute, at least as long).
func tolerationCovers(ss, t corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(ss, t) {
		return true
	}
	if ss.Key != "" && t.Key != ss.Key {
		return false
	}
	if ss.Effect != "" && t.Effect != ss.Effect {
		return false
	}
	if ss.Effect == corev1.TaintEffectNoExecute && ss.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *ss.TolerationSeconds) {
		return false
	}
	switch ss.Operator {
	case corev1.TolerationOpEqual, "":
		return (t.Operator == corev1.TolerationOpEqual || t.Operator == "") && t.Value == ss.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}
