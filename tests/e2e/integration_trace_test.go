package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/trace"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// The only fitting node comes last: the scheduler's node informer sees nodes in the
	// order they were created, so whenever it places the pod it knows all three (created
	// first, the big node could be the only one it knew yet — seen under load).
	node("trace-small", "100m")
	node("trace-tainted", "8", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	node("trace-big", "8")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "traced"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var tr resources.PodTrace
	waitfor.Condition(t, 30*time.Second, "the binding to reach the trace", func(ctx context.Context) (bool, error) {
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

	// A node reports conditions in whole seconds: one stamped with the second the pod was
	// created in reads earlier than the request's authentication, yet follows the binding.
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue,
		LastTransitionTime: p.CreationTimestamp})
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("traced").SubResource("trace").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr = resources.PodTrace{}
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatal(err)
	}
	var order []string
	for i, s := range tr.Steps {
		order = append(order, s.Component+"/"+s.Step)
		if i > 0 && s.Time.Before(tr.Steps[i-1].Time) {
			t.Errorf("step %d %s/%s at %v is before the step above it at %v", i, s.Component, s.Step, s.Time, tr.Steps[i-1].Time)
		}
	}
	if len(tr.Steps) < 2 || tr.Steps[0].Component != "authentication" || tr.Steps[len(tr.Steps)-1].Step != "init containers" {
		t.Errorf("steps in order %v: want authentication first and the node's init containers last", order)
	}
}

// TestUnschedulablePodTrace creates a pod whose nodeSelector no node matches: it is never
// bound, yet pods/trace shows the scheduler's attempts — the profile, which Filter plugin
// rejected how many nodes and why (the FailedScheduling facts) — and folds a repeated
// attempt with the same outcome into the same row.
func TestUnschedulablePodTrace(t *testing.T) {
	srv := testserver.Start(t)
	cs := srv.Clientset(t, false)
	ctx := ctxFor(t)
	ns := newNamespace(t, cs, "trace-pending")
	for _, name := range []string{"pending-a", "pending-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"disk": "hdd"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"disk": "ssd"}, Containers: []corev1.Container{{Name: "c", Image: "hello:1"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// attempts reads the trace and returns its scheduler steps.
	attempts := func(ctx context.Context) ([]trace.Step, error) {
		body, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("pending").SubResource("trace").DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var tr resources.PodTrace
		if err := json.Unmarshal(body, &tr); err != nil {
			return nil, err
		}
		var out []trace.Step
		for _, s := range tr.Steps {
			if s.Component == "scheduler" {
				out = append(out, s)
			}
			if s.Component == "binding" {
				return nil, fmt.Errorf("the pod was bound: %+v", s)
			}
		}
		return out, nil
	}
	var steps []trace.Step
	waitfor.Condition(t, 30*time.Second, "a failed scheduling attempt in the trace", func(ctx context.Context) (bool, error) {
		var err error
		steps, err = attempts(ctx)
		return len(steps) > 0, err
	})
	s := steps[0]
	if s.Step != "schedule" || s.Result != "unschedulable" {
		t.Fatalf("scheduler step %+v, want schedule=unschedulable", s)
	}
	var sum scheduler.Summary
	if err := json.Unmarshal([]byte(s.Detail), &sum); err != nil {
		t.Fatalf("scheduler summary %q: %v", s.Detail, err)
	}
	if sum.Profile != corev1.DefaultSchedulerName || sum.Nodes < 2 || sum.Feasible != 0 || sum.Winner != "" {
		t.Fatalf("summary %+v, want profile %s, 0 of at least 2 nodes feasible, no winner", sum, corev1.DefaultSchedulerName)
	}
	if r := sum.Rejected["NodeAffinity"]; r.Nodes != sum.Nodes || !strings.Contains(strings.Join(r.Reasons, ","), "didn't match Pod's node affinity/selector") {
		t.Fatalf("rejections %+v, want NodeAffinity rejecting all %d nodes for the selector", sum.Rejected, sum.Nodes)
	}
	wantMsg := fmt.Sprintf("0/%d nodes are available: %d node(s) didn't match Pod's node affinity/selector", sum.Nodes, sum.Nodes)
	if !strings.HasPrefix(sum.Message, wantMsg) {
		t.Fatalf("message %q, want the FailedScheduling event's %q", sum.Message, wantMsg)
	}
	// A node's labels change (still no ssd): the scheduler retries and fails the same way;
	// the trace counts the attempt on the same row instead of adding one.
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "pending-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"disk":"nvme"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Condition(t, 30*time.Second, "the retried attempt to be counted", func(ctx context.Context) (bool, error) {
		var err error
		steps, err = attempts(ctx)
		return len(steps) == 1 && steps[0].Count >= 2, err
	})
	if !steps[0].Last.After(steps[0].Time) {
		t.Fatalf("folded step %+v: the last attempt is not after the first", steps[0])
	}
}
