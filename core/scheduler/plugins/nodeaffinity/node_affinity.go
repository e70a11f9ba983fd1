// Package nodeaffinity is the NodeAffinity plugin: nodeSelector and required node
// affinity filter; preferred node affinity scores (sum of matching term weights).
package nodeaffinity

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// ErrReasonPod is Kubernetes' reason.
const ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"

// Args are the plugin args (addedAffinity applies to every pod of the profile).
type Args struct {
	// AddedAffinity is ANDed with every pod's own node affinity.
	AddedAffinity *v1.NodeAffinity `json:"addedAffinity,omitempty"`
}

// NodeAffinity is the plugin.
type NodeAffinity struct {
	added          *nodeaffinity.NodeSelector
	addedPreferred *nodeaffinity.PreferredSchedulingTerms
}

// New is the plugin factory.
func New(_ context.Context, raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	pl := &NodeAffinity{}
	if len(raw) == 0 {
		return pl, nil
	}
	var a Args
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("NodeAffinity args: %w", err)
	}
	if a.AddedAffinity != nil {
		if ns := a.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil {
			sel, err := nodeaffinity.NewNodeSelector(ns)
			if err != nil {
				return nil, fmt.Errorf("NodeAffinity addedAffinity: %w", err)
			}
			pl.added = sel
		}
		if len(a.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			t, err := nodeaffinity.NewPreferredSchedulingTerms(a.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
			if err != nil {
				return nil, fmt.Errorf("NodeAffinity addedAffinity: %w", err)
			}
			pl.addedPreferred = t
		}
	}
	return pl, nil
}

// Name implements Plugin.
func (*NodeAffinity) Name() string { return names.NodeAffinity }

const preFilterKey framework.StateKey = "PreFilter" + names.NodeAffinity

type preFilterState struct {
	required nodeaffinity.RequiredNodeAffinity
}

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter parses the pod's required affinity once per cycle; pods without any are skipped.
func (pl *NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	hasRequired := pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil &&
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
	if len(pod.Spec.NodeSelector) == 0 && !hasRequired && pl.added == nil {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod)})
	return nil, nil
}

// Filter implements FilterPlugin.
func (pl *NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	node := ni.Node()
	if pl.added != nil && !pl.added.Match(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match scheduler-enforced node affinity")
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		s = &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod)}
	}
	ok, _ := s.required.Match(node)
	if !ok {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	}
	return nil
}

const preScoreKey framework.StateKey = "PreScore" + names.NodeAffinity

type preScoreState struct {
	preferred *nodeaffinity.PreferredSchedulingTerms
}

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore parses the preferred terms; pods without any (and no added ones) are skipped.
func (pl *NodeAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	var terms []v1.PreferredSchedulingTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		terms = a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	if len(terms) == 0 && pl.addedPreferred == nil {
		return framework.NewStatus(framework.Skip)
	}
	p, err := nodeaffinity.NewPreferredSchedulingTerms(terms)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("parsing pod %s/%s preferred node affinity: %w", pod.Namespace, pod.Name, err))
	}
	state.Write(preScoreKey, &preScoreState{preferred: p})
	return nil
}

// Score sums the weights of the matching preferred terms.
func (pl *NodeAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	if pl.addedPreferred != nil {
		score += pl.addedPreferred.Score(ni.Node())
	}
	score += s.preferred.Score(ni.Node())
	return score, nil
}

// ScoreExtensions implements ScorePlugin.
func (pl *NodeAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore scales so the best node gets 100.
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
}
