package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// HorizontalPodAutoscalers are served in autoscaling/v1 and v2 as two views of the same
// objects, in protobuf and JSON: v1's CPU target is v2's CPU utilization metric, and
// what v1 cannot express survives a v1 read-modify-write.
func TestHorizontalPodAutoscalerVersions(t *testing.T) {
	srv := testserver.StartAPI(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cs := srv.Clientset(t, m.json)
			ns := newNamespace(t, cs, "hpa-"+m.name)
			ctx := ctxFor(t)
			pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}
			v2 := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
					MaxReplicas:    5,
					Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
						Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}, pods},
				}}
			created, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, v2, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if created.Spec.MinReplicas == nil || *created.Spec.MinReplicas != 1 {
				t.Errorf("minReplicas %v, want the default 1", created.Spec.MinReplicas)
			}
			v1, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p := v1.Spec.TargetCPUUtilizationPercentage; p == nil || *p != 50 || v1.Spec.MaxReplicas != 5 || v1.Spec.ScaleTargetRef.Name != "web" {
				t.Fatalf("v1 view: %+v", v1.Spec)
			}
			v1.Spec.MaxReplicas = 7
			v1.Spec.TargetCPUUtilizationPercentage = ptr.To[int32](60)
			if _, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Update(ctx, v1, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.MaxReplicas != 7 || len(got.Spec.Metrics) != 2 || *got.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 ||
				got.Spec.Metrics[1].Pods == nil || got.Spec.Metrics[1].Pods.Metric.Name != "requests" || len(got.Annotations) != 0 {
				t.Fatalf("v2 after a v1 update: %+v %v", got.Spec, got.Annotations)
			}
			l1, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l1.Items) != 1 || l1.Items[0].Spec.MaxReplicas != 7 {
				t.Fatalf("v1 list: %v %v", l1, err)
			}
			// Kubernetes' replica bounds, in either version.
			bad := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](3), MaxReplicas: 2,
					ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}}}
			_, err = cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Create(ctx, bad, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || err.(apierrors.APIStatus).Status().Details.Causes[0].Field != "spec.maxReplicas" {
				t.Fatalf("maxReplicas below minReplicas: %v", err)
			}
			if err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("v2 after a v1 delete: %v", err)
			}
		})
	}
}

// HorizontalPodAutoscalers are validated as Kubernetes validates them, with a 422 whose
// causes name the fields, and a given behavior is defaulted.
func TestHorizontalPodAutoscalerValidation(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "hpa-validation")
	ctx := ctxFor(t)
	hpas := cs.AutoscalingV2().HorizontalPodAutoscalers(ns)
	cpu := func(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: target}}
	}
	utilization := autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}
	rules := func(window int32, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(window), Policies: policies}
	}
	cases := []struct {
		name       string
		edit       func(*autoscalingv2.HorizontalPodAutoscalerSpec)
		wantFields []string
	}{
		{"minReplicas 0", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) { s.MinReplicas = ptr.To[int32](0) }, []string{"spec.minReplicas"}},
		{"no target", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{cpu(autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType})}
		}, []string{"spec.metrics[0].resource.target.averageUtilization"}},
		{"both targets", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{cpu(autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType,
				AverageUtilization: ptr.To[int32](50), AverageValue: ptr.To(resource.MustParse("100m"))})}
		}, []string{"spec.metrics[0].resource.target.averageValue"}},
		{"a negative target and a bad target type", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{cpu(autoscalingv2.MetricTarget{Type: "Most", AverageUtilization: ptr.To[int32](-5)})}
		}, []string{"spec.metrics[0].resource.target.type", "spec.metrics[0].resource.target.averageUtilization"}},
		{"the source of another type", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			m := cpu(utilization)
			m.Type = autoscalingv2.PodsMetricSourceType
			s.Metrics = []autoscalingv2.MetricSpec{m}
		}, []string{"spec.metrics[0].pods", "spec.metrics[0].resource"}},
		{"a container resource without a container", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ContainerResourceMetricSourceType,
				ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceMemory, Target: utilization}}}
		}, []string{"spec.metrics[0].containerResource.container"}},
		{"an external metric without a target", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType}}}}
		}, []string{"spec.metrics[0].external.target.averageValue"}},
		{"bad behavior", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: rules(4000, autoscalingv2.HPAScalingPolicy{Type: "Nodes", Value: 0, PeriodSeconds: 3600}),
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.ScalingPolicySelect("Most")),
					Tolerance: ptr.To(resource.MustParse("-0.1"))}}
		}, []string{"spec.behavior.scaleUp.stabilizationWindowSeconds", "spec.behavior.scaleUp.policies[0].type",
			"spec.behavior.scaleUp.policies[0].value", "spec.behavior.scaleUp.policies[0].periodSeconds",
			"spec.behavior.scaleDown.selectPolicy", "spec.behavior.scaleDown.tolerance"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i)},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5, Metrics: []autoscalingv2.MetricSpec{cpu(utilization)},
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
			tc.edit(&h.Spec)
			_, err := hpas.Create(ctx, h, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("created, or not a 422: %v", err)
			}
			var got []string
			for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
				got = append(got, c.Field)
			}
			for _, f := range tc.wantFields {
				if !slices.Contains(got, f) {
					t.Errorf("no cause for %s in %q", f, got)
				}
			}
		})
	}
	// A partial behavior gets Kubernetes' defaults for the rest.
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "good"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Behavior:       &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}}}
	got, err := hpas.Create(ctx, h, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := got.Spec.Behavior
	if len(got.Spec.Metrics) != 1 || b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || *b.ScaleUp.StabilizationWindowSeconds != 0 ||
		*b.ScaleUp.SelectPolicy != autoscalingv2.MaxChangePolicySelect || len(b.ScaleDown.Policies) != 1 || b.ScaleDown.Policies[0].Value != 100 ||
		*b.ScaleDown.StabilizationWindowSeconds != 0 {
		t.Errorf("defaulted spec: %+v %+v %+v", got.Spec, b.ScaleUp, b.ScaleDown)
	}
}
