package noderesources

import (
	"context"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

func TestFitFilter(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	withInit := func(p *v1.Pod, reqs ...v1.ResourceList) *v1.Pod {
		for _, r := range reqs {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init", Resources: v1.ResourceRequirements{Requests: r}})
		}
		return p
	}
	withSidecar := func(p *v1.Pod, r v1.ResourceList) *v1.Pod {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "sidecar", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: r}})
		return p
	}
	withOverhead := func(p *v1.Pod, r v1.ResourceList) *v1.Pod { p.Spec.Overhead = r; return p }
	node := st.Node("n", st.Res("cpu", "4", "memory", "8Gi", "pods", "3"))
	used := st.Pod("used", st.Res("cpu", "2", "memory", "2Gi"))
	tests := []struct {
		name    string
		pod     *v1.Pod
		pods    []*v1.Pod
		code    framework.Code
		reasons []string
	}{
		{"fits", st.Pod("p", st.Res("cpu", "1", "memory", "1Gi")), []*v1.Pod{used}, framework.Success, nil},
		{"exactly fits", st.Pod("p", st.Res("cpu", "2", "memory", "6Gi")), []*v1.Pod{used}, framework.Success, nil},
		{"insufficient cpu", st.Pod("p", st.Res("cpu", "3")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu"}},
		{"insufficient cpu and memory", st.Pod("p", st.Res("cpu", "3", "memory", "7Gi")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu", "Insufficient memory"}},
		{"more than the node has: unresolvable", st.Pod("p", st.Res("cpu", "5")), nil, framework.UnschedulableAndUnresolvable, []string{"Insufficient cpu"}},
		{"sum of containers", st.Pod("p", st.Res("cpu", "1"), st.Res("cpu", "1500m")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu"}},
		{"init container larger than containers", withInit(st.Pod("p", st.Res("cpu", "1")), st.Res("cpu", "3")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu"}},
		{"init container smaller than containers", withInit(st.Pod("p", st.Res("cpu", "1500m")), st.Res("cpu", "2")), []*v1.Pod{used}, framework.Success, nil},
		{"max of init containers, not sum", withInit(st.Pod("p", st.Res("cpu", "500m")), st.Res("cpu", "2"), st.Res("cpu", "2")), []*v1.Pod{used}, framework.Success, nil},
		{"sidecar adds to containers", withSidecar(st.Pod("p", st.Res("cpu", "1500m")), st.Res("cpu", "1")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu"}},
		{"overhead counted", withOverhead(st.Pod("p", st.Res("cpu", "1500m")), st.Res("cpu", "1")), []*v1.Pod{used}, framework.Unschedulable, []string{"Insufficient cpu"}},
		{"overhead fits", withOverhead(st.Pod("p", st.Res("cpu", "1")), st.Res("cpu", "1")), []*v1.Pod{used}, framework.Success, nil},
		{"too many pods", st.Pod("p"), []*v1.Pod{st.Pod("a"), st.Pod("b"), st.Pod("c")}, framework.Unschedulable, []string{"Too many pods"}},
		{"extended resource missing", st.Pod("p", st.Res("example.com/gpu", "1")), nil, framework.UnschedulableAndUnresolvable, []string{"Insufficient example.com/gpu"}},
	}
	pl, err := NewFitWithArgs(FitArgs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ni := st.NodeInfo(node, tc.pods...)
			state := framework.NewCycleState()
			if _, s := pl.PreFilter(context.Background(), state, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s.Err())
			}
			s := pl.Filter(context.Background(), state, tc.pod, ni)
			if s.Code() != tc.code || !reflect.DeepEqual(s.Reasons(), tc.reasons) {
				t.Errorf("got %v %q, want %v %q", s.Code(), s.Reasons(), tc.code, tc.reasons)
			}
		})
	}
}

func TestFitIgnoredResources(t *testing.T) {
	pl, _ := NewFitWithArgs(FitArgs{IgnoredResources: []string{"example.com/foo"}})
	pod := st.Pod("p", st.Res("example.com/foo", "1"))
	if s := pl.Filter(context.Background(), framework.NewCycleState(), pod, st.NodeInfo(st.Node("n", st.Res("cpu", "1")))); !s.IsSuccess() {
		t.Fatalf("ignored resource should fit: %v", s.Reasons())
	}
}

// scores runs PreScore+Score of plugin pl over nodes and returns the raw scores.
func scores(t *testing.T, pl interface {
	framework.PreScorePlugin
	framework.ScorePlugin
}, pod *v1.Pod, nis []*framework.NodeInfo) []int64 {
	t.Helper()
	state := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), state, pod, nis); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s.Code())
	}
	var out []int64
	for _, ni := range nis {
		v, s := pl.Score(context.Background(), state, pod, ni)
		if !s.IsSuccess() {
			t.Fatal(s.Err())
		}
		out = append(out, v)
	}
	return out
}

// The cases below are Kubernetes' own test cases (least_allocated_test.go, …).
func TestScoringStrategies(t *testing.T) {
	nodes := func() []*framework.NodeInfo {
		return []*framework.NodeInfo{
			st.NodeInfo(st.Node("node1", st.Res("cpu", "4000m", "memory", "10000"))),
			st.NodeInfo(st.Node("node2", st.Res("cpu", "6000m", "memory", "10000"))),
		}
	}
	pod := st.Pod("p", st.Res("cpu", "3000m", "memory", "5000"))
	shape := &struct {
		Shape []UtilizationShapePoint `json:"shape,omitempty"`
	}{Shape: []UtilizationShapePoint{{0, 0}, {100, 10}}}
	for _, tc := range []struct {
		strategy *ScoringStrategy
		want     []int64
	}{
		{&ScoringStrategy{Type: LeastAllocated}, []int64{37, 50}},
		{&ScoringStrategy{Type: MostAllocated}, []int64{62, 50}},
		{&ScoringStrategy{Type: RequestedToCapacityRatio, RequestedToCapacityRatio: shape}, []int64{63, 50}},
		{&ScoringStrategy{Type: LeastAllocated, Resources: []ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory", Weight: 1}}}, []int64{31, 50}},
	} {
		t.Run(tc.strategy.Type, func(t *testing.T) {
			pl, err := NewFitWithArgs(FitArgs{ScoringStrategy: tc.strategy})
			if err != nil {
				t.Fatal(err)
			}
			if got := scores(t, pl, pod, nodes()); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("best-effort pods count as 100m/200Mi", func(t *testing.T) {
		pl, _ := NewFitWithArgs(FitArgs{})
		nis := []*framework.NodeInfo{st.NodeInfo(st.Node("n", st.Res("cpu", "1000m", "memory", "2000Mi")))}
		// (1000-100)/1000 = 90, (2000-200)/2000 = 90
		if got := scores(t, pl, st.Pod("be"), nis); got[0] != 90 {
			t.Errorf("got %v, want 90", got)
		}
	})
}

func TestBalancedAllocation(t *testing.T) {
	nis := []*framework.NodeInfo{
		st.NodeInfo(st.Node("node1", st.Res("cpu", "4000m", "memory", "10000"))),
		st.NodeInfo(st.Node("node2", st.Res("cpu", "6000m", "memory", "10000"))),
	}
	pl, _ := NewBalancedAllocation(context.Background(), nil, nil)
	ba := pl.(*BalancedAllocation)
	// node1: with pod cpu .75 mem .5 → std .125 → 87; without → 100; 50+(50+87-100)/2 = 68.
	// node2: .5/.5 → 100 both → 75.
	if got := scores(t, ba, st.Pod("p", st.Res("cpu", "3000m", "memory", "5000")), nis); !reflect.DeepEqual(got, []int64{68, 75}) {
		t.Errorf("got %v, want [68 75]", got)
	}
	if s := ba.PreScore(context.Background(), framework.NewCycleState(), st.Pod("be"), nis); !s.IsSkip() {
		t.Errorf("best-effort pod: got %v, want Skip", s.Code())
	}
}
