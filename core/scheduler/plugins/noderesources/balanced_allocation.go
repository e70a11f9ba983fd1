package noderesources

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
)

// BalancedAllocationArgs are the plugin args.
type BalancedAllocationArgs struct {
	// Resources are the balanced resources (default cpu and memory).
	Resources []ResourceSpec `json:"resources,omitempty"`
}

// BalancedAllocation favours nodes whose resource usage stays balanced across resources.
type BalancedAllocation struct{ resources []ResourceSpec }

// NewBalancedAllocation is the factory.
func NewBalancedAllocation(_ context.Context, raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	var a BalancedAllocationArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("NodeResourcesBalancedAllocation args: %w", err)
		}
	}
	if len(a.Resources) == 0 {
		a.Resources = DefaultResources()
	}
	return &BalancedAllocation{resources: a.Resources}, nil
}

// Name implements Plugin.
func (*BalancedAllocation) Name() string { return names.NodeResourcesBalancedAllocation }

const balancedKey framework.StateKey = "PreScore" + names.NodeResourcesBalancedAllocation

type balancedState struct{ podRequests []int64 }

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *balancedState) Clone() framework.StateData { return s }

// PreScore computes the pod's requests; best-effort pods are skipped (as Kubernetes, so
// they are not all piled on one node).
func (ba *BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	req := podRequestList(framework.NewPodInfo(pod), ba.resources, true)
	best := true
	for _, r := range req {
		if r != 0 {
			best = false
		}
	}
	if best {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(balancedKey, &balancedState{podRequests: req})
	return nil
}

// Score is 50 + (50 + balance(with pod) − balance(without pod)) / 2, where balance is
// (1 − std of the utilization fractions) × 100: Kubernetes 1.37's improvement score.
func (ba *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*balancedState](state, balancedKey)
	if err != nil {
		s = &balancedState{podRequests: podRequestList(framework.NewPodInfo(pod), ba.resources, true)}
	}
	requested, allocated, allocatable := nodeRequests(ni, ba.resources, s.podRequests, true)
	with := balancedResourceScore(requested, allocatable)
	without := balancedResourceScore(allocated, allocatable)
	return framework.MaxNodeScore/2 + (framework.MaxNodeScore/2+with-without)/2, nil
}

// ScoreExtensions implements ScorePlugin.
func (*BalancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }

func balancedResourceScore(requested, allocatable []int64) int64 {
	var fractions []float64
	var total float64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		f := float64(requested[i]) / float64(allocatable[i])
		if f > 1 {
			f = 1
		}
		total += f
		fractions = append(fractions, f)
	}
	std := 0.0
	if len(fractions) == 2 {
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	} else if len(fractions) > 2 {
		mean := total / float64(len(fractions))
		var sum float64
		for _, f := range fractions {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(len(fractions)))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}
