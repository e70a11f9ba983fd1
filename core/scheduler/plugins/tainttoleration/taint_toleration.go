// Package tainttoleration is the TaintToleration plugin: Filter rejects nodes with an
// untolerated NoSchedule/NoExecute taint; Score prefers nodes with fewer untolerated
// PreferNoSchedule taints.
package tainttoleration

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// TaintToleration is the plugin.
type TaintToleration struct{}

// New is the plugin factory.
func New(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) {
	return &TaintToleration{}, nil
}

// Name implements Plugin.
func (*TaintToleration) Name() string { return names.TaintToleration }

func doNotSchedule(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

// Filter implements FilterPlugin; the reason names the first untolerated taint.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.Node().Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false)
	if !bad {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

const preScoreKey framework.StateKey = "PreScore" + names.TaintToleration

type preScoreState struct{ tolerations []v1.Toleration }

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore keeps the tolerations that apply to PreferNoSchedule taints.
func (*TaintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	var tol []v1.Toleration
	for _, t := range pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			tol = append(tol, t)
		}
	}
	state.Write(preScoreKey, &preScoreState{tolerations: tol})
	return nil
}

// Score counts the untolerated PreferNoSchedule taints (normalized in reverse).
func (*TaintToleration) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var n int64
	for i := range ni.Node().Spec.Taints {
		t := &ni.Node().Spec.Taints[i]
		if t.Effect != v1.TaintEffectPreferNoSchedule {
			continue
		}
		if !corev1helpers.TolerationsTolerateTaint(klog.Background(), s.tolerations, t, false) {
			n++
		}
	}
	return n, nil
}

// ScoreExtensions implements ScorePlugin.
func (pl *TaintToleration) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore makes fewer untolerated taints score higher.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
}
