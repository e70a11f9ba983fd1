package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodTrace creates a pod on a cluster of three nodes, one tainted and one too small,
// and reads pods/trace: who authenticated it, the admission plugins, storage, the
// scheduler's summary (why two nodes were rejected, the winner's scores) and the binding.
func TestPodTrace(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Clientset(t, false)
	ctx := ctxFor(t)
	ns := newNamespace(t, cs, "trace")
	node := func(name, cpu string, taints ...corev1.Taint) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node("trace-big", "8")
	node("trace-small", "100m")
	node("trace-tainted", "8", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "traced"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var tr resources.PodTrace
	eventually(t, 30*time.Second, "the binding to reach the trace", func(ctx context.Context) (bool, error) {
		body, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("traced").SubResource("trace").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		tr = resources.PodTrace{}
		if err := json.Unmarshal(body, &tr); err != nil {
			return false, err
		}
		for _, s := range tr.Steps {
			if s.Component == "binding" {
				return true, nil
			}
		}
		return false, nil
	})
	if !tr.Recorded || tr.Kind != "PodTrace" || tr.Metadata.Name != "traced" {
		t.Fatalf("trace header %+v", tr)
	}
	byComponent := map[string][]string{}
	var summary scheduler.Summary
	for _, s := range tr.Steps {
		byComponent[s.Component] = append(byComponent[s.Component], s.Step+"="+s.Result)
		if s.Component == "scheduler" {
			if err := json.Unmarshal([]byte(s.Detail), &summary); err != nil {
				t.Fatalf("scheduler summary %q: %v", s.Detail, err)
			}
		}
	}
	want := map[string]string{
		"authentication": "x509=authenticated",
		"authorization":  "create pods=Allow",
		"admission":      "NamespaceLifecycle=mutate: allowed",
		"storage":        "create=stored",
		"binding":        "pods/binding=bound to trace-big",
	}
	for comp, step := range want {
		if !strings.Contains(strings.Join(byComponent[comp], "|"), step) {
			t.Errorf("%s steps %v, want one %q", comp, byComponent[comp], step)
		}
	}
	if summary.Winner != "trace-big" || summary.Feasible != 1 || summary.Nodes < 3 {
		t.Fatalf("summary %+v", summary)
	}
	if summary.Rejected["TaintToleration"].Nodes != 1 || summary.Rejected["NodeResourcesFit"].Nodes != 1 {
		t.Fatalf("rejections %+v, want one node each by TaintToleration and NodeResourcesFit", summary.Rejected)
	}
	if !strings.Contains(strings.Join(summary.Rejected["NodeResourcesFit"].Reasons, ","), "Insufficient cpu") {
		t.Fatalf("NodeResourcesFit reasons %v", summary.Rejected["NodeResourcesFit"].Reasons)
	}
	// The summary lives in the trace, not on the pod.
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "traced", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Annotations[resources.TraceSchedulingAnnotation]; ok {
		t.Fatal("the scheduling summary was stored on the pod")
	}
}
