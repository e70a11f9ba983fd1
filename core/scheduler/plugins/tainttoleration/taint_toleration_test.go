package tainttoleration

import (
	"context"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

func nodeWith(taints ...v1.Taint) *framework.NodeInfo {
	n := st.Node("n", st.Res("cpu", "1"))
	n.Spec.Taints = taints
	return st.NodeInfo(n)
}

func podWith(tol ...v1.Toleration) *v1.Pod {
	p := st.Pod("p")
	p.Spec.Tolerations = tol
	return p
}

func TestFilter(t *testing.T) {
	ns := v1.Taint{Key: "dedicated", Value: "user1", Effect: v1.TaintEffectNoSchedule}
	ne := v1.Taint{Key: "dedicated", Value: "user1", Effect: v1.TaintEffectNoExecute}
	pref := v1.Taint{Key: "dedicated", Value: "user1", Effect: v1.TaintEffectPreferNoSchedule}
	tests := []struct {
		name   string
		pod    *v1.Pod
		node   *framework.NodeInfo
		reason string
	}{
		{"no taints", podWith(), nodeWith(), ""},
		{"untolerated NoSchedule", podWith(), nodeWith(ns), "node(s) had untolerated taint {dedicated: user1}"},
		{"untolerated NoExecute", podWith(), nodeWith(ne), "node(s) had untolerated taint {dedicated: user1}"},
		{"PreferNoSchedule is not filtered", podWith(), nodeWith(pref), ""},
		{"tolerated Equal", podWith(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "user1", Effect: v1.TaintEffectNoSchedule}), nodeWith(ns), ""},
		{"tolerated Exists", podWith(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists}), nodeWith(ns, ne), ""},
		{"wrong value", podWith(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "user2", Effect: v1.TaintEffectNoSchedule}), nodeWith(ns), "node(s) had untolerated taint {dedicated: user1}"},
		{"wrong effect", podWith(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "user1", Effect: v1.TaintEffectNoExecute}), nodeWith(ns), "node(s) had untolerated taint {dedicated: user1}"},
		{"empty key Exists tolerates all", podWith(v1.Toleration{Operator: v1.TolerationOpExists}), nodeWith(ns, ne), ""},
	}
	pl := &TaintToleration{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := pl.Filter(context.Background(), framework.NewCycleState(), tc.pod, tc.node)
			if tc.reason == "" {
				if !s.IsSuccess() {
					t.Fatalf("got %v %v, want success", s.Code(), s.Reasons())
				}
				return
			}
			if s.Code() != framework.UnschedulableAndUnresolvable || s.Message() != tc.reason {
				t.Fatalf("got %v %q, want UnschedulableAndUnresolvable %q", s.Code(), s.Message(), tc.reason)
			}
		})
	}
}

func TestScore(t *testing.T) {
	pref := func(k string) v1.Taint { return v1.Taint{Key: k, Value: "v", Effect: v1.TaintEffectPreferNoSchedule} }
	nodes := []*framework.NodeInfo{nodeWith(), nodeWith(pref("a")), nodeWith(pref("a"), pref("b")), nodeWith(pref("c"))}
	pod := podWith(v1.Toleration{Key: "c", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule})
	pl := &TaintToleration{}
	state := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), state, pod, nodes); !s.IsSuccess() {
		t.Fatal(s.Err())
	}
	list := framework.NodeScoreList{}
	for _, ni := range nodes {
		v, s := pl.Score(context.Background(), state, pod, ni)
		if !s.IsSuccess() {
			t.Fatal(s.Err())
		}
		list = append(list, framework.NodeScore{Score: v})
	}
	pl.NormalizeScore(context.Background(), state, pod, list)
	var got []int64
	for _, s := range list {
		got = append(got, s.Score)
	}
	if want := []int64{100, 50, 0, 100}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
