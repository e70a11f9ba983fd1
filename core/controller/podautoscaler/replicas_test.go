package podautoscaler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// podSpec describes a test pod: its CPU request (millicores; 0 = none), phase and
// readiness, and its CPU usage sample (-1 = no sample).
type podSpec struct {
	request int64
	phase   corev1.PodPhase
	ready   bool
	deleted bool
	usage   int64
}

func ready(request, usage int64) podSpec {
	return podSpec{request: request, phase: corev1.PodRunning, ready: true, usage: usage}
}

// testPod is a pod of the "web" app started 10 min before t0.
func testPod(name string, s podSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: s.phase, StartTime: &metav1.Time{Time: t0.Add(-10 * time.Minute)}}}
	if s.request > 0 {
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(s.request, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	// A ready pod became ready a minute after it started; an unready one never did.
	status, since := corev1.ConditionFalse, t0.Add(-10*time.Minute+10*time.Second)
	if s.ready {
		status, since = corev1.ConditionTrue, t0.Add(-9*time.Minute)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Time{Time: since}}}
	if s.deleted {
		pod.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return pod
}

func podsAndMetrics(specs []podSpec) ([]*corev1.Pod, map[string]podMetric) {
	var pods []*corev1.Pod
	metrics := map[string]podMetric{}
	for i, s := range specs {
		name := fmt.Sprintf("web-%d", i)
		pods = append(pods, testPod(name, s))
		if s.usage >= 0 {
			metrics[name] = podMetric{value: s.usage, timestamp: t0.Add(-10 * time.Second), window: 30 * time.Second}
		}
	}
	return pods, metrics
}

func TestResourceReplicas(t *testing.T) {
	pending := podSpec{request: 1000, phase: corev1.PodPending, usage: -1}
	missing := ready(1000, -1)
	cases := []struct {
		name            string
		current         int32
		target          usageTarget
		pods            []podSpec
		want            int32
		wantUtilization int32
		wantErr         string
	}{
		{name: "within the tolerance", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 520), ready(1000, 480), ready(1000, 530)}, want: 3, wantUtilization: 51},
		{name: "just beyond the tolerance", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 560), ready(1000, 560), ready(1000, 560)}, want: 4, wantUtilization: 56},
		{name: "scale up", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 900), ready(1000, 900), ready(1000, 900)}, want: 6, wantUtilization: 90},
		{name: "scale down", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 100), ready(1000, 100), ready(1000, 100)}, want: 1, wantUtilization: 10},
		{name: "an unready pod counts as idle when scaling up", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 900), ready(1000, 900), pending}, want: 4, wantUtilization: 90},
		{name: "an unready pod is left out when scaling down", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 200), ready(1000, 200), pending}, want: 1, wantUtilization: 20},
		{name: "a running pod never ready is unready for cpu", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 900), ready(1000, 900), {request: 1000, phase: corev1.PodRunning, usage: 900}}, want: 4, wantUtilization: 90},
		{name: "a missing pod counts as using its request when scaling down", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 0), ready(1000, 0), missing}, want: 2, wantUtilization: 0},
		{name: "a missing pod counts as idle when scaling up", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 900), ready(1000, 900), missing}, want: 4, wantUtilization: 90},
		{name: "missing pods that reverse the direction cancel the scaling", current: 3, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 600), missing, missing}, want: 3, wantUtilization: 60},
		{name: "deleted and failed pods are ignored", current: 2, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(1000, 1000), ready(1000, 1000), {request: 1000, phase: corev1.PodRunning, ready: true, deleted: true, usage: 0},
				{request: 1000, phase: corev1.PodFailed, usage: 0}}, want: 4, wantUtilization: 100},
		{name: "average value", current: 2, target: usageTarget{averageValue: 500},
			pods: []podSpec{ready(0, 1000), ready(0, 1000)}, want: 4},
		{name: "average value, missing pod at the target when scaling down", current: 3, target: usageTarget{averageValue: 500},
			pods: []podSpec{ready(0, 100), ready(0, 100), missing}, want: 2},
		{name: "a pod without a request", current: 1, target: usageTarget{utilization: 50},
			pods: []podSpec{ready(0, 100)}, wantErr: "missing request for cpu in container app of Pod web-0"},
		{name: "no pods", current: 1, target: usageTarget{utilization: 50}, wantErr: "no pods returned by selector"},
		{name: "only unready pods", current: 1, target: usageTarget{utilization: 50},
			pods: []podSpec{pending}, wantErr: "did not receive metrics for targeted pods"},
	}
	calc := calculator{now: t0, cpuInitialization: DefaultCPUInitializationPeriod, initialReadiness: DefaultInitialReadinessDelay,
		tol: tolerances{down: 0.1, up: 0.1}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pods, metrics := podsAndMetrics(tc.pods)
			p, err := calc.resourceReplicas(tc.current, tc.target, corev1.ResourceCPU, "", pods, metrics)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.replicas != tc.want || p.utilization != tc.wantUtilization {
				t.Errorf("got %d replicas at %d%%, want %d at %d%%", p.replicas, p.utilization, tc.want, tc.wantUtilization)
			}
		})
	}
}

// A pod's CPU sample taken within one window of its becoming ready, early in its life,
// is not trusted; a memory sample is.
func TestCPUInitialization(t *testing.T) {
	calc := calculator{now: t0, cpuInitialization: DefaultCPUInitializationPeriod, initialReadiness: DefaultInitialReadinessDelay, tol: tolerances{0.1, 0.1}}
	pods, metrics := podsAndMetrics([]podSpec{ready(1000, 900), ready(1000, 900)})
	young := pods[1]
	young.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Minute)}
	young.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: t0.Add(-20 * time.Second)}
	p, err := calc.resourceReplicas(2, usageTarget{utilization: 30}, corev1.ResourceCPU, "", pods, metrics)
	if err != nil || p.replicas != 3 {
		t.Errorf("cpu: %d, %v; want 3 (the young pod counted as idle)", p.replicas, err)
	}
	pods, metrics = podsAndMetrics([]podSpec{ready(1000, 900), ready(1000, 900)})
	pods[1].Status.StartTime = young.Status.StartTime
	pods[1].Status.Conditions = young.Status.Conditions
	p, err = calc.resourceReplicas(2, usageTarget{averageValue: 450}, corev1.ResourceMemory, "", pods, metrics)
	if err != nil || p.replicas != 4 {
		t.Errorf("memory: %d, %v; want 4", p.replicas, err)
	}
}
