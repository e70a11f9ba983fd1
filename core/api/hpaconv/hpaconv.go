// Package hpaconv converts HorizontalPodAutoscalers between autoscaling/v1 and
// autoscaling/v2, the stored version, as Kubernetes serves both views of one object.
package hpaconv

import (
	"encoding/json"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Annotation keeps, on an autoscaling/v1 HorizontalPodAutoscaler, what v1 cannot
// express (metrics other than the CPU target, behavior, conditions, current metrics) as
// autoscaling/v2 JSON, so that a v1 read-modify-write keeps it. kube-apiserver keeps the
// same in several autoscaling.alpha.kubernetes.io annotations in v1's alpha types; this
// one is wasmplane's own.
const Annotation = "autoscaling.wasmplane.io/v2"

// v2Extra is the content of Annotation.
type v2Extra struct {
	Metrics        []autoscalingv2.MetricSpec                       `json:"metrics,omitempty"`
	Behavior       *autoscalingv2.HorizontalPodAutoscalerBehavior   `json:"behavior,omitempty"`
	CurrentMetrics []autoscalingv2.MetricStatus                     `json:"currentMetrics,omitempty"`
	Conditions     []autoscalingv2.HorizontalPodAutoscalerCondition `json:"conditions,omitempty"`
}

// CPUUtilization is the v2 metric v1's targetCPUUtilizationPercentage stands for.
func CPUUtilization(pct int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}}
}

// isCPUUtilization reports whether m is the one metric v1 expresses.
func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil
}

// ToV1 converts a stored (v2) HorizontalPodAutoscaler to v1.
func ToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	out := &autoscalingv1.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
			CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
		},
	}
	extra := v2Extra{Behavior: in.Spec.Behavior, Conditions: in.Status.Conditions}
	for _, m := range in.Spec.Metrics {
		if out.Spec.TargetCPUUtilizationPercentage == nil && isCPUUtilization(m) {
			out.Spec.TargetCPUUtilizationPercentage = ptr.To(*m.Resource.Target.AverageUtilization)
			continue
		}
		extra.Metrics = append(extra.Metrics, m)
	}
	for _, m := range in.Status.CurrentMetrics {
		if out.Status.CurrentCPUUtilizationPercentage == nil && m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
			m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptr.To(*m.Resource.Current.AverageUtilization)
			continue
		}
		extra.CurrentMetrics = append(extra.CurrentMetrics, m)
	}
	if len(extra.Metrics) > 0 || extra.Behavior != nil || len(extra.CurrentMetrics) > 0 || len(extra.Conditions) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return nil, fmt.Errorf("encoding the v2 fields of HorizontalPodAutoscaler %s: %w", in.Name, err)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[Annotation] = string(b)
	}
	return out, nil
}

// ToV2 converts a v1 HorizontalPodAutoscaler to the stored version, v2.
func ToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	out := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
			CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
		},
	}
	var extra v2Extra
	if s, ok := out.Annotations[Annotation]; ok {
		if err := json.NewDecoder(strings.NewReader(s)).Decode(&extra); err != nil {
			return nil, fmt.Errorf("decoding annotation %s: %w", Annotation, err)
		}
		delete(out.Annotations, Annotation)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
	}
	if p := in.Spec.TargetCPUUtilizationPercentage; p != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, CPUUtilization(*p))
	}
	out.Spec.Metrics = append(out.Spec.Metrics, extra.Metrics...)
	out.Spec.Behavior = extra.Behavior
	if p := in.Status.CurrentCPUUtilizationPercentage; p != nil {
		out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(*p)}}})
	}
	out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, extra.CurrentMetrics...)
	out.Status.Conditions = extra.Conditions
	return out, nil
}

// AddConversions registers ToV1 and ToV2 in scheme, for the code that converts through
// it (the field manager keeps managedFields in the stored version).
func AddConversions(scheme *runtime.Scheme) error {
	if err := scheme.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversion.Scope) error {
			out, err := ToV2(a.(*autoscalingv1.HorizontalPodAutoscaler))
			if err != nil {
				return err
			}
			*b.(*autoscalingv2.HorizontalPodAutoscaler) = *out
			return nil
		}); err != nil {
		return fmt.Errorf("registering the HorizontalPodAutoscaler v1 to v2 conversion: %w", err)
	}
	if err := scheme.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversion.Scope) error {
			out, err := ToV1(a.(*autoscalingv2.HorizontalPodAutoscaler))
			if err != nil {
				return err
			}
			*b.(*autoscalingv1.HorizontalPodAutoscaler) = *out
			return nil
		}); err != nil {
		return fmt.Errorf("registering the HorizontalPodAutoscaler v2 to v1 conversion: %w", err)
	}
	return nil
}

// DefaultBehavior fills the unset fields of b's scaling rules as autoscaling/v2's
// defaulting does: scaling up by at most 4 pods or 100% every 15 s, whichever is more,
// with no stabilization; scaling down by at most 100% every 15 s. The scale-down
// stabilization window stays unset, as in Kubernetes, so the controller's own default
// (300 s) applies. A nil b stays nil: the controller then uses its older fixed limits.
func DefaultBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	if b == nil {
		return
	}
	b.ScaleUp = fillRules(b.ScaleUp, autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	})
	b.ScaleDown = fillRules(b.ScaleDown, autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	})
}

// fillRules returns def with every field set in from taken from it; a nil (not empty)
// policy list is the only one defaulted, so that validation can refuse an empty one.
func fillRules(from *autoscalingv2.HPAScalingRules, def autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return &def
	}
	if from.SelectPolicy != nil {
		def.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		def.Policies = from.Policies
	}
	def.Tolerance = from.Tolerance
	return &def
}
