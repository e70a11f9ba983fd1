package hpaconv

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestRoundTrip(t *testing.T) {
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}
	cases := []struct {
		name       string
		v2         autoscalingv2.HorizontalPodAutoscalerSpec
		status     autoscalingv2.HorizontalPodAutoscalerStatus
		wantCPU    *int32
		annotation bool
	}{
		{"cpu only", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{CPUUtilization(70)}},
			autoscalingv2.HorizontalPodAutoscalerStatus{}, ptr.To[int32](70), false},
		{"no metrics", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 3}, autoscalingv2.HorizontalPodAutoscalerStatus{}, nil, false},
		{"cpu and pods, behavior, conditions", autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr.To[int32](2), MaxReplicas: 9,
			Metrics:  []autoscalingv2.MetricSpec{CPUUtilization(50), pods},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}},
			autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 3,
				CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
					Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](40)}}}},
				Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale"}}},
			ptr.To[int32](50), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"a": "b"}},
				Spec: c.v2, Status: c.status}
			v1, err := ToV1(in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(v1.Spec.TargetCPUUtilizationPercentage, c.wantCPU) {
				t.Errorf("targetCPUUtilizationPercentage %v, want %v", v1.Spec.TargetCPUUtilizationPercentage, c.wantCPU)
			}
			if _, ok := v1.Annotations[Annotation]; ok != c.annotation {
				t.Errorf("annotation present %v, want %v", ok, c.annotation)
			}
			back, err := ToV2(v1)
			if err != nil {
				t.Fatal(err)
			}
			in.TypeMeta = back.TypeMeta
			if !equality.Semantic.DeepEqual(in, back) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, in)
			}
		})
	}
	bad := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{Annotation: "{"}}}
	if _, err := ToV2(bad); err == nil {
		t.Error("a broken annotation converted")
	}
	s := runtime.NewScheme()
	if err := AddConversions(s); err != nil {
		t.Fatal(err)
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := s.Convert(&autoscalingv1.HorizontalPodAutoscaler{Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 4,
		TargetCPUUtilizationPercentage: ptr.To[int32](30)}}, out, nil); err != nil {
		t.Fatal(err)
	}
	if out.Spec.MaxReplicas != 4 || len(out.Spec.Metrics) != 1 {
		t.Fatalf("through the scheme: %+v", out.Spec)
	}
}
