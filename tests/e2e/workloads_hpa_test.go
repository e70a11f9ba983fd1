package e2e

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/podautoscaler"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// loadMetrics reports, for every running pod the selector picks, the same CPU usage: the
// load a test dials up and down. It stands in for metrics.k8s.io.
type loadMetrics struct {
	cs    kubernetes.Interface
	milli atomic.Int64
}

func (l *loadMetrics) ListPodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]podautoscaler.PodUsage, error) {
	pods, err := l.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var out []podautoscaler.PodUsage
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		out = append(out, podautoscaler.PodUsage{Name: p.Name, Timestamp: time.Now(), Window: time.Second,
			Containers: []podautoscaler.ContainerUsage{{Name: "sleeper", Usage: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(l.milli.Load(), resource.DecimalSI)}}}})
	}
	return out, nil
}

const hpaDeploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: hpa-web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: hpa-web
  template:
    metadata:
      labels:
        app: hpa-web
    spec:
      containers:
      - name: sleeper
        image: sleeper:latest
        imagePullPolicy: IfNotPresent
        resources:
          requests:
            cpu: 100m
`

// TestHorizontalPodAutoscaler runs the HPA controller, with a metrics source the test
// drives, against a Deployment made by kubectl and an HPA made by `kubectl autoscale`:
// high CPU scales it from 1 to the HPA's maximum, low CPU back to 1.
func TestHorizontalPodAutoscaler(t *testing.T) {
	load := &loadMetrics{}
	s := testserver.Start(t, func(c *server.Config) {
		c.Controllers.HPASyncPeriod = 500 * time.Millisecond
		c.Controllers.PodMetrics = load
	})
	load.cs = s.Clientset(t, false)
	e := &workloadsEnv{s: s, cs: load.cs}
	testserver.StartNamedWASINode(t, s, "node-1", modules, "sleeper")
	ctx := context.Background()
	hpas := e.cs.AutoscalingV2().HorizontalPodAutoscalers("default")
	deployments := e.cs.AppsV1().Deployments("default")

	e.kubectl(t, hpaDeploymentYAML, "create", "-f", "-")
	if out := e.kubectl(t, "", "autoscale", "deployment", "hpa-web", "--cpu-percent=50", "--min=1", "--max=3"); !strings.Contains(out, "autoscaled") {
		t.Fatalf("kubectl autoscale: %s", out)
	}
	// Scaling down at once, so the test need not wait out the 5-minute default window.
	if _, err := hpas.Patch(ctx, "hpa-web", types.MergePatchType,
		[]byte(`{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":0}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa, err := hpas.Get(ctx, "hpa-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := hpa.Spec.Behavior; b == nil || b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || b.ScaleDown == nil || len(b.ScaleDown.Policies) != 1 {
		t.Fatalf("behavior not defaulted: %+v", b)
	}

	waitFor := func(what string, want int32, cond func(h *autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		var last *autoscalingv2.HorizontalPodAutoscaler
		e.poll(t, what, 30*time.Second, func(ctx context.Context) (bool, error) {
			h, err := hpas.Get(ctx, "hpa-web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = h
			d, err := deployments.Get(ctx, "hpa-web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return *d.Spec.Replicas == want && d.Status.ReadyReplicas == want && cond(h), nil
		})
		return last
	}
	conditions := func(h *autoscalingv2.HorizontalPodAutoscaler) map[autoscalingv2.HorizontalPodAutoscalerConditionType]string {
		out := map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{}
		for _, c := range h.Status.Conditions {
			out[c.Type] = string(c.Status) + "/" + c.Reason
		}
		return out
	}

	// Four times the 50% target: 8 replicas wanted, 3 allowed.
	load.milli.Store(200)
	hpa = waitFor("the scale-up to 3", 3, func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.CurrentReplicas == 3 && h.Status.DesiredReplicas == 3
	})
	if hpa.Status.LastScaleTime == nil || len(hpa.Status.CurrentMetrics) != 1 || hpa.Status.CurrentMetrics[0].Resource == nil ||
		hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization == nil || *hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 200 {
		t.Errorf("status after the scale-up: %+v", hpa.Status)
	}
	c := conditions(hpa)
	if c[autoscalingv2.AbleToScale] != "True/ReadyForNewScale" && c[autoscalingv2.AbleToScale] != "True/SucceededRescale" ||
		c[autoscalingv2.ScalingActive] != "True/ValidMetricFound" || c[autoscalingv2.ScalingLimited] != "True/TooManyReplicas" {
		t.Errorf("conditions after the scale-up: %v", c)
	}
	out := e.kubectl(t, "", "get", "hpa", "hpa-web")
	if !regexp.MustCompile(`(?m)^NAME\s+REFERENCE\s+TARGETS\s+MINPODS\s+MAXPODS\s+REPLICAS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^hpa-web\s+Deployment/hpa-web\s+cpu: 200%/50%\s+1\s+3\s+3\s+\S+$`).MatchString(out) {
		t.Errorf("kubectl get hpa:\n%s", out)
	}

	// A tenth of the target: back to minReplicas.
	load.milli.Store(5)
	hpa = waitFor("the scale-down to 1", 1, func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.CurrentReplicas == 1 && h.Status.DesiredReplicas == 1
	})
	if c := conditions(hpa); c[autoscalingv2.ScalingActive] != "True/ValidMetricFound" || c[autoscalingv2.ScalingLimited] != "False/DesiredWithinRange" {
		t.Errorf("conditions after the scale-down: %v", c)
	}
	events, err := e.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=hpa-web"})
	if err != nil {
		t.Fatal(err)
	}
	var rescales []string
	for _, ev := range events.Items {
		if ev.Reason == "SuccessfulRescale" {
			rescales = append(rescales, ev.Message)
		}
	}
	for _, want := range []string{"New size: 3; reason: cpu resource utilization (percentage of request) above target", "New size: 1; reason: All metrics below target"} {
		if !slices.Contains(rescales, want) {
			t.Errorf("no SuccessfulRescale event %q in %q", want, rescales)
		}
	}
}
