// Package noderesources holds NodeResourcesFit (requests must fit the node's free
// allocatable; scored LeastAllocated, MostAllocated or RequestedToCapacityRatio) and
// NodeResourcesBalancedAllocation, with Kubernetes' formulas.
package noderesources

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Scoring strategy types.
const (
	// LeastAllocated favours nodes with the most free resources (spreading).
	LeastAllocated = "LeastAllocated"
	// MostAllocated favours the fullest nodes (bin packing).
	MostAllocated = "MostAllocated"
	// RequestedToCapacityRatio scores utilization through a piecewise-linear shape.
	RequestedToCapacityRatio = "RequestedToCapacityRatio"
)

// ResourceSpec is a resource and its weight in scoring.
type ResourceSpec struct {
	// Name is the resource name.
	Name string `json:"name"`
	// Weight is its weight (0 = 1).
	Weight int64 `json:"weight,omitempty"`
}

// UtilizationShapePoint is one point of the RequestedToCapacityRatio shape.
type UtilizationShapePoint struct {
	// Utilization in percent (0–100).
	Utilization int32 `json:"utilization"`
	// Score from 0 to 10.
	Score int32 `json:"score"`
}

// ScoringStrategy selects and parameterizes the score.
type ScoringStrategy struct {
	// Type is LeastAllocated (default), MostAllocated or RequestedToCapacityRatio.
	Type string `json:"type,omitempty"`
	// Resources are the scored resources (default cpu and memory, weight 1).
	Resources []ResourceSpec `json:"resources,omitempty"`
	// RequestedToCapacityRatio holds the shape.
	RequestedToCapacityRatio *struct {
		Shape []UtilizationShapePoint `json:"shape,omitempty"`
	} `json:"requestedToCapacityRatio,omitempty"`
}

// FitArgs are NodeResourcesFit's args.
type FitArgs struct {
	// IgnoredResources are not checked by Filter.
	IgnoredResources []string `json:"ignoredResources,omitempty"`
	// ScoringStrategy configures Score.
	ScoringStrategy *ScoringStrategy `json:"scoringStrategy,omitempty"`
}

// DefaultResources are cpu and memory with weight 1.
func DefaultResources() []ResourceSpec {
	return []ResourceSpec{{Name: string(v1.ResourceCPU), Weight: 1}, {Name: string(v1.ResourceMemory), Weight: 1}}
}

// Fit is NodeResourcesFit.
type Fit struct {
	ignored   sets.Set[string]
	resources []ResourceSpec
	scorer    func(requested, allocatable []int64) int64
	strategy  string
}

// NewFit is the factory.
func NewFit(_ context.Context, raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	var a FitArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("NodeResourcesFit args: %w", err)
		}
	}
	return NewFitWithArgs(a)
}

// NewFitWithArgs builds the plugin from typed args.
func NewFitWithArgs(a FitArgs) (*Fit, error) {
	s := a.ScoringStrategy
	if s == nil {
		s = &ScoringStrategy{}
	}
	if s.Type == "" {
		s.Type = LeastAllocated
	}
	res := s.Resources
	if len(res) == 0 {
		res = DefaultResources()
	}
	for i := range res {
		if res[i].Weight <= 0 {
			res[i].Weight = 1
		}
	}
	f := &Fit{ignored: sets.New(a.IgnoredResources...), resources: res, strategy: s.Type}
	switch s.Type {
	case LeastAllocated:
		f.scorer = weighted(res, leastRequestedScore)
	case MostAllocated:
		f.scorer = weighted(res, mostRequestedScore)
	case RequestedToCapacityRatio:
		if s.RequestedToCapacityRatio == nil || len(s.RequestedToCapacityRatio.Shape) == 0 {
			return nil, fmt.Errorf("NodeResourcesFit: RequestedToCapacityRatio needs a shape")
		}
		shape := s.RequestedToCapacityRatio.Shape
		for i, p := range shape {
			if p.Utilization < 0 || p.Utilization > 100 || p.Score < 0 || p.Score > 10 {
				return nil, fmt.Errorf("NodeResourcesFit: shape point %d out of range", i)
			}
			if i > 0 && p.Utilization <= shape[i-1].Utilization {
				return nil, fmt.Errorf("NodeResourcesFit: shape utilization must increase")
			}
		}
		f.scorer = requestedToCapacityRatioScorer(res, shape)
	default:
		return nil, fmt.Errorf("NodeResourcesFit: unknown scoring strategy %q", s.Type)
	}
	return f, nil
}

// Name implements Plugin.
func (*Fit) Name() string { return names.NodeResourcesFit }

// Strategy returns the scoring strategy type.
func (f *Fit) Strategy() string { return f.strategy }

const preFilterKey framework.StateKey = "PreFilter" + names.NodeResourcesFit

type preFilterState struct{ *framework.Resource }

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter computes the pod's effective requests (init containers and overhead included).
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	state.Write(preFilterKey, &preFilterState{framework.NewPodInfo(pod).Requests})
	return nil, nil
}

// InsufficientResource describes one resource that does not fit.
type InsufficientResource struct {
	// ResourceName is the resource.
	ResourceName v1.ResourceName
	// Reason is "Insufficient cpu", "Too many pods", …
	Reason string
	// Unresolvable is set when the request exceeds the node's whole allocatable.
	Unresolvable bool
}

// Fits lists what does not fit (empty: the pod fits).
func Fits(req *framework.Resource, ni *framework.NodeInfo, ignored sets.Set[string]) []InsufficientResource {
	var out []InsufficientResource
	alloc, used := ni.Allocatable, ni.Requested
	if len(ni.Pods)+1 > alloc.AllowedPodNumber {
		out = append(out, InsufficientResource{ResourceName: v1.ResourcePods, Reason: "Too many pods"})
	}
	if req.MilliCPU == 0 && req.Memory == 0 && req.EphemeralStorage == 0 && len(req.ScalarResources) == 0 {
		return out
	}
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		out = append(out, InsufficientResource{v1.ResourceCPU, "Insufficient cpu", req.MilliCPU > alloc.MilliCPU})
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory {
		out = append(out, InsufficientResource{v1.ResourceMemory, "Insufficient memory", req.Memory > alloc.Memory})
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		out = append(out, InsufficientResource{v1.ResourceEphemeralStorage, "Insufficient ephemeral-storage", req.EphemeralStorage > alloc.EphemeralStorage})
	}
	for name, q := range req.ScalarResources {
		if q == 0 || ignored.Has(string(name)) {
			continue
		}
		if q > alloc.ScalarResources[name]-used.ScalarResources[name] {
			out = append(out, InsufficientResource{name, fmt.Sprintf("Insufficient %v", name), q > alloc.ScalarResources[name]})
		}
	}
	return out
}

// Filter implements FilterPlugin.
func (f *Fit) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		s = &preFilterState{framework.NewPodInfo(pod).Requests}
	}
	ins := Fits(s.Resource, ni, f.ignored)
	if len(ins) == 0 {
		return nil
	}
	code := framework.Unschedulable
	reasons := make([]string, 0, len(ins))
	for _, r := range ins {
		reasons = append(reasons, r.Reason)
		if r.Unresolvable {
			code = framework.UnschedulableAndUnresolvable
		}
	}
	return framework.NewStatus(code, reasons...)
}

const preScoreKey framework.StateKey = "PreScore" + names.NodeResourcesFit

type preScoreState struct{ podRequests []int64 }

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore computes the pod's non-zero requests for the scored resources.
func (f *Fit) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(preScoreKey, &preScoreState{podRequests: podRequestList(framework.NewPodInfo(pod), f.resources, false)})
	return nil
}

// Score implements ScorePlugin.
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		s = &preScoreState{podRequests: podRequestList(framework.NewPodInfo(pod), f.resources, false)}
	}
	requested, _, allocatable := nodeRequests(ni, f.resources, s.podRequests, false)
	return f.scorer(requested, allocatable), nil
}

// ScoreExtensions implements ScorePlugin (scores are already 0–100).
func (*Fit) ScoreExtensions() framework.ScoreExtensions { return nil }

func isScalar(name string) bool {
	return name != string(v1.ResourceCPU) && name != string(v1.ResourceMemory) && name != string(v1.ResourceEphemeralStorage)
}

// podRequestList returns the pod's request per scored resource (non-zero defaults for
// cpu/memory unless useRequested).
func podRequestList(pi *framework.PodInfo, res []ResourceSpec, useRequested bool) []int64 {
	out := make([]int64, len(res))
	for i, r := range res {
		switch r.Name {
		case string(v1.ResourceCPU):
			if useRequested {
				out[i] = pi.Requests.MilliCPU
			} else {
				out[i] = pi.NonZeroRequests.MilliCPU
			}
		case string(v1.ResourceMemory):
			if useRequested {
				out[i] = pi.Requests.Memory
			} else {
				out[i] = pi.NonZeroRequests.Memory
			}
		case string(v1.ResourceEphemeralStorage):
			out[i] = pi.Requests.EphemeralStorage
		default:
			out[i] = pi.Requests.ScalarResources[v1.ResourceName(r.Name)]
		}
	}
	return out
}

// nodeRequests returns requested (node + pod), already allocated and allocatable per
// resource; resources with zero allocatable (or unrequested scalars) are left at 0.
func nodeRequests(ni *framework.NodeInfo, res []ResourceSpec, pod []int64, useRequested bool) (requested, allocated, allocatable []int64) {
	requested = make([]int64, len(res))
	allocated = make([]int64, len(res))
	allocatable = make([]int64, len(res))
	used := ni.NonZeroRequested
	if useRequested {
		used = ni.Requested
	}
	for i, r := range res {
		if pod[i] == 0 && isScalar(r.Name) {
			continue
		}
		var a, u int64
		switch r.Name {
		case string(v1.ResourceCPU):
			a, u = ni.Allocatable.MilliCPU, used.MilliCPU
		case string(v1.ResourceMemory):
			a, u = ni.Allocatable.Memory, used.Memory
		case string(v1.ResourceEphemeralStorage):
			a, u = ni.Allocatable.EphemeralStorage, ni.Requested.EphemeralStorage
		default:
			a, u = ni.Allocatable.ScalarResources[v1.ResourceName(r.Name)], ni.Requested.ScalarResources[v1.ResourceName(r.Name)]
		}
		if a == 0 {
			continue
		}
		allocatable[i], allocated[i], requested[i] = a, u, u+pod[i]
	}
	return requested, allocated, allocatable
}

func weighted(res []ResourceSpec, score func(requested, capacity int64) int64) func([]int64, []int64) int64 {
	return func(requested, allocatable []int64) int64 {
		var total, weights int64
		for i := range requested {
			if allocatable[i] == 0 {
				continue
			}
			total += score(requested[i], allocatable[i]) * res[i].Weight
			weights += res[i].Weight
		}
		if weights == 0 {
			return 0
		}
		return total / weights
	}
}

// leastRequestedScore is (capacity − requested) × 100 / capacity.
func leastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * framework.MaxNodeScore / capacity
}

// mostRequestedScore is requested × 100 / capacity (requested capped at capacity).
func mostRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	if requested > capacity {
		requested = capacity
	}
	return requested * framework.MaxNodeScore / capacity
}

func requestedToCapacityRatioScorer(res []ResourceSpec, shape []UtilizationShapePoint) func([]int64, []int64) int64 {
	type point struct{ u, s int64 }
	pts := make([]point, len(shape))
	for i, p := range shape {
		// Shape scores are 0–10; the scheduler's range is 0–100.
		pts[i] = point{int64(p.Utilization), int64(p.Score) * (framework.MaxNodeScore / 10)}
	}
	raw := func(p int64) int64 {
		for i := range pts {
			if p <= pts[i].u {
				if i == 0 {
					return pts[0].s
				}
				return pts[i-1].s + (pts[i].s-pts[i-1].s)*(p-pts[i-1].u)/(pts[i].u-pts[i-1].u)
			}
		}
		return pts[len(pts)-1].s
	}
	return func(requested, allocatable []int64) int64 {
		var total, weights int64
		for i := range requested {
			if allocatable[i] == 0 {
				continue
			}
			var s int64
			if requested[i] > allocatable[i] {
				s = raw(100)
			} else {
				s = raw(requested[i] * 100 / allocatable[i])
			}
			if s > 0 {
				total += s * res[i].Weight
				weights += res[i].Weight
			}
		}
		if weights == 0 {
			return 0
		}
		return int64(math.Round(float64(total) / float64(weights)))
	}
}
