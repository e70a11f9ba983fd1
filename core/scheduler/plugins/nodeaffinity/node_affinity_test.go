package nodeaffinity

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

func node(name string, labels map[string]string) *framework.NodeInfo {
	n := st.Node(name, st.Res("cpu", "1"))
	for k, v := range labels {
		n.Labels[k] = v
	}
	return st.NodeInfo(n)
}

func required(terms ...v1.NodeSelectorTerm) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
}

func expr(key string, op v1.NodeSelectorOperator, vals ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}}}
}

func TestFilter(t *testing.T) {
	zoneA := map[string]string{"zone": "a", "disk": "ssd"}
	tests := []struct {
		name     string
		selector map[string]string
		affinity *v1.Affinity
		labels   map[string]string
		fits     bool
	}{
		{"nothing required", nil, nil, zoneA, true},
		{"nodeSelector matches", map[string]string{"zone": "a"}, nil, zoneA, true},
		{"nodeSelector mismatches", map[string]string{"zone": "b"}, nil, zoneA, false},
		{"nodeSelector missing label", map[string]string{"gpu": "true"}, nil, zoneA, false},
		{"In matches", nil, required(expr("zone", v1.NodeSelectorOpIn, "a", "b")), zoneA, true},
		{"In mismatches", nil, required(expr("zone", v1.NodeSelectorOpIn, "c")), zoneA, false},
		{"NotIn", nil, required(expr("zone", v1.NodeSelectorOpNotIn, "a")), zoneA, false},
		{"Exists", nil, required(expr("disk", v1.NodeSelectorOpExists)), zoneA, true},
		{"DoesNotExist", nil, required(expr("disk", v1.NodeSelectorOpDoesNotExist)), zoneA, false},
		{"Gt", nil, required(expr("cores", v1.NodeSelectorOpGt, "4")), map[string]string{"cores": "8"}, true},
		{"terms are ORed", nil, required(expr("zone", v1.NodeSelectorOpIn, "c"), expr("disk", v1.NodeSelectorOpIn, "ssd")), zoneA, true},
		{"nodeSelector and affinity are ANDed", map[string]string{"zone": "b"}, required(expr("disk", v1.NodeSelectorOpIn, "ssd")), zoneA, false},
		{"matchFields metadata.name", nil, required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}), zoneA, true},
	}
	plugin, _ := New(context.Background(), nil, nil)
	pl := plugin.(*NodeAffinity)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := st.Pod("p")
			pod.Spec.NodeSelector = tc.selector
			pod.Spec.Affinity = tc.affinity
			state := framework.NewCycleState()
			_, s := pl.PreFilter(context.Background(), state, pod, nil)
			if s.IsSkip() {
				if !tc.fits {
					t.Fatal("skipped a pod with requirements")
				}
				return
			}
			s = pl.Filter(context.Background(), state, pod, node("n1", tc.labels))
			if s.IsSuccess() != tc.fits {
				t.Fatalf("fits=%v, want %v (%v)", s.IsSuccess(), tc.fits, s.Reasons())
			}
			if !tc.fits && (s.Code() != framework.UnschedulableAndUnresolvable || s.Message() != ErrReasonPod) {
				t.Fatalf("got %v %q", s.Code(), s.Message())
			}
		})
	}
}

func TestScorePreferred(t *testing.T) {
	pod := st.Pod("p")
	pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
		{Weight: 5, Preference: expr("zone", v1.NodeSelectorOpIn, "a")},
		{Weight: 3, Preference: expr("disk", v1.NodeSelectorOpIn, "ssd")},
	}}}
	nodes := []*framework.NodeInfo{
		node("n1", map[string]string{"zone": "a"}),
		node("n2", map[string]string{"zone": "a", "disk": "ssd"}),
		node("n3", nil),
	}
	plugin, _ := New(context.Background(), nil, nil)
	pl := plugin.(*NodeAffinity)
	state := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), state, pod, nodes); !s.IsSuccess() {
		t.Fatal(s.Code())
	}
	list := framework.NodeScoreList{}
	for _, ni := range nodes {
		v, _ := pl.Score(context.Background(), state, pod, ni)
		list = append(list, framework.NodeScore{Name: ni.Node().Name, Score: v})
	}
	if list[0].Score != 5 || list[1].Score != 8 || list[2].Score != 0 {
		t.Fatalf("raw scores %v", list)
	}
	pl.NormalizeScore(context.Background(), state, pod, list)
	if list[0].Score != 62 || list[1].Score != 100 || list[2].Score != 0 {
		t.Fatalf("normalized scores %v, want 62 100 0", list)
	}
	if s := pl.PreScore(context.Background(), framework.NewCycleState(), st.Pod("none"), nodes); !s.IsSkip() {
		t.Fatal("pod without preferences should be skipped")
	}
}

func TestAddedAffinity(t *testing.T) {
	args, _ := json.Marshal(Args{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{expr("pool", v1.NodeSelectorOpIn, "batch")}}}})
	plugin, err := New(context.Background(), args, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := plugin.(*NodeAffinity)
	state := framework.NewCycleState()
	pod := st.Pod("p")
	pl.PreFilter(context.Background(), state, pod, nil)
	if s := pl.Filter(context.Background(), state, pod, node("n", map[string]string{"pool": "web"})); s.IsSuccess() {
		t.Fatal("added affinity not enforced")
	}
	if s := pl.Filter(context.Background(), state, pod, node("n", map[string]string{"pool": "batch"})); !s.IsSuccess() {
		t.Fatal(s.Reasons())
	}
}
