package integration

import (
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
