package defaultpreemption_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func prio(p *v1.Pod, v int32) *v1.Pod { p.Spec.Priority = &v; return p }

func setup(t *testing.T, objs []*v1.Pod, nis ...*framework.NodeInfo) (*framework.Framework, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, p := range objs {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := framework.NewFramework(context.Background(), "p", plugins.NewInTreeRegistry(), &framework.Plugins{MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{
		{Name: "PrioritySort"}, {Name: "TaintToleration"}, {Name: "NodeResourcesFit"}, {Name: "DefaultPreemption"}, {Name: "DefaultBinder"},
	}}}, nil, framework.Options{ClientSet: client})
	if err != nil {
		t.Fatal(err)
	}
	fw.SetSnapshot(framework.NewSnapshot(nis...))
	return fw, client
}

// run does what a scheduling cycle does before PostFilter: PreFilter, then Filter per node.
func run(t *testing.T, fw *framework.Framework, pod *v1.Pod) (*framework.PostFilterResult, *framework.Status) {
	t.Helper()
	ps, state, ctx := fw.Plugins(), framework.NewCycleState(), context.Background()
	if _, s := ps.RunPreFilterPlugins(ctx, state, pod, nil); !s.IsSuccess() {
		t.Fatal(s.Err())
	}
	filtered := framework.NodeToStatus{}
	for _, ni := range fw.SnapshotSharedLister().List() {
		if s := ps.RunFilterPlugins(ctx, state, pod, ni); !s.IsSuccess() {
			filtered[ni.Node().Name] = s
		}
	}
	return ps.RunPostFilterPlugins(ctx, state, pod, filtered)
}

func TestPreemptsMinimalVictims(t *testing.T) {
	p1 := prio(st.Pod("p1", st.Res("cpu", "1")), 1)
	p2 := prio(st.Pod("p2", st.Res("cpu", "1")), 2)
	p3 := prio(st.Pod("p3", st.Res("cpu", "2")), 5)
	n1, n2 := st.Node("n1", st.Res("cpu", "2")), st.Node("n2", st.Res("cpu", "2"))
	fw, client := setup(t, []*v1.Pod{p1, p2, p3}, st.NodeInfo(n1, p1, p2), st.NodeInfo(n2, p3))
	res, s := run(t, fw, prio(st.Pod("high", st.Res("cpu", "1")), 10))
	if !s.IsSuccess() {
		t.Fatalf("preemption failed: %v", s.Message())
	}
	// n1 needs only p1 (priority 1) evicted; n2 would need p3 (priority 5).
	if res.NominatedNodeName != "n1" {
		t.Fatalf("nominated %q, want n1", res.NominatedNodeName)
	}
	left, _ := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "p2,p3" {
		t.Fatalf("pods left %v, want p2,p3 (only p1 evicted)", names)
	}
	// The victim is marked a disruption target before it is deleted, as Kubernetes does.
	marked := false
	for _, a := range client.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok && pa.GetName() == "p1" && pa.GetSubresource() == "status" &&
			strings.Contains(string(pa.GetPatch()), `"reason":"PreemptionByScheduler"`) {
			marked = true
		}
		if a.GetVerb() == "delete" && !marked {
			t.Fatal("p1 deleted before it was marked a disruption target")
		}
	}
	if !marked {
		t.Fatal("p1 never marked a disruption target")
	}
}

func TestNoPreemptionMessage(t *testing.T) {
	same := prio(st.Pod("same", st.Res("cpu", "2")), 10)
	tainted := st.Node("tainted", st.Res("cpu", "8"))
	tainted.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
	fw, _ := setup(t, nil, st.NodeInfo(st.Node("n1", st.Res("cpu", "2")), same), st.NodeInfo(tainted))
	_, s := run(t, fw, prio(st.Pod("p", st.Res("cpu", "1")), 10))
	want := "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
	if s.Code() != framework.Unschedulable || s.Message() != want {
		t.Fatalf("got %v %q\nwant %q", s.Code(), s.Message(), want)
	}
	never := v1.PreemptNever
	p := prio(st.Pod("never", st.Res("cpu", "1")), 100)
	p.Spec.PreemptionPolicy = &never
	if _, s := run(t, fw, p); s.IsSuccess() || !strings.Contains(s.Message(), "preemptionPolicy=Never") {
		t.Fatalf("PreemptNever: %v", s.Message())
	}
}
