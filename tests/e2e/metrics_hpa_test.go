package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// TestHorizontalPodAutoscalerOnResourceMetrics closes the loop with nothing faked: a
// Deployment of a WASI program spinning on the CPU, the kubelet's CPU accounting, the API
// server's metrics.k8s.io, and the HPA controller scaling the Deployment up, then back
// down once the program is replaced by an idle one.
func TestHorizontalPodAutoscalerOnResourceMetrics(t *testing.T) {
	s := testserver.Start(t, func(c *server.Config) {
		c.MetricsResolution = time.Second
		c.Controllers.HPASyncPeriod = time.Second
	})
	testserver.StartWASINode(t, s, modules, "toolbox")
	cs := s.Clientset(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "burn"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "burn", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "toolbox:latest", ImagePullPolicy: corev1.PullIfNotPresent,
				Command:   []string{"sh", "-c", "while true; do true; done"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "burn", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "burn"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 2,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}}}
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas := func(want int32, why string) *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		var last *autoscalingv2.HorizontalPodAutoscaler
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 150*time.Second, true, func(ctx context.Context) (bool, error) {
			d, err := cs.AppsV1().Deployments("default").Get(ctx, "burn", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if last, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "burn", metav1.GetOptions{}); err != nil {
				return false, err
			}
			return *d.Spec.Replicas == want && last.Status.DesiredReplicas == want, nil
		})
		if err != nil {
			t.Fatalf("%s: the Deployment never had %d replicas; HPA status %+v", why, want, last.Status)
		}
		return last
	}
	up := waitReplicas(2, "a program spinning at 1 core against a 200m request")
	if len(up.Status.CurrentMetrics) == 0 || up.Status.CurrentMetrics[0].Resource == nil ||
		ptr.Deref(up.Status.CurrentMetrics[0].Resource.Current.AverageUtilization, 0) <= 50 {
		t.Errorf("current metrics after scaling up: %+v", up.Status.CurrentMetrics)
	}
	out := s.MustKubectl(t, kubectlBin, "default", "", "get", "hpa", "burn")
	t.Logf("kubectl get hpa:\n%s", out)
	if !strings.Contains(out, "cpu: ") || !strings.Contains(out, "/50%") {
		t.Errorf("kubectl get hpa printed:\n%s", out)
	}

	// The program goes idle (a new template, rolled out): usage falls and the HPA scales
	// back to its minimum.
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"main","command":[%q]}]}}}}`, "top")
	if _, err := cs.AppsV1().Deployments("default").Patch(ctx, "burn", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	down := waitReplicas(1, "an idle program")
	if c := down.Status.CurrentMetrics; len(c) == 0 || c[0].Resource == nil || ptr.Deref(c[0].Resource.Current.AverageUtilization, 100) >= 50 {
		t.Errorf("current metrics after scaling down: %+v", c)
	}
	events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=burn,reason=SuccessfulRescale"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) < 2 {
		t.Errorf("%d SuccessfulRescale events, want one up and one down", len(events.Items))
	}
}
