// Package native holds the native Go twins of the example WASM scheduling plugins
// (examples/plugins/go/node-label-filter, examples/plugins/go/label-score and
// examples/scheduling/strategy-score) as scheduler framework plugins: the same logic, run
// in-process on the scheduler's own objects. Tests check that a WASM plugin and its twin
// place pods alike, and benchmarks measure what the sandbox costs.
package native

import (
	"context"
	"fmt"
	"slices"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	v1 "k8s.io/api/core/v1"
)

// NodeLabelFilter admits a pod only to nodes carrying Label (with one of Values, when
// Values is not empty), as node-label-filter does.
type NodeLabelFilter struct {
	// PluginName is the plugin's name in the framework.
	PluginName string
	// Label is the required node label.
	Label string
	// Values, when not empty, are the accepted label values.
	Values []string
}

// Name implements framework.Plugin.
func (f *NodeLabelFilter) Name() string { return f.PluginName }

// Filter implements framework.FilterPlugin with the guest's reasons, word for word.
func (f *NodeLabelFilter) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	v, ok := ni.Node().Labels[f.Label]
	if !ok {
		return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("node lacks label %q", f.Label))
	}
	if len(f.Values) > 0 && !slices.Contains(f.Values, v) {
		return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("node label %s=%s is not one of %v", f.Label, v, f.Values))
	}
	return nil
}

// LabelScore scores a node by the integer value of its label Label, clamped to 0–100
// (missing or not a number: 0), as label-score does.
type LabelScore struct {
	// PluginName is the plugin's name in the framework.
	PluginName string
	// Label is the node label read as a score.
	Label string
}

// Name implements framework.Plugin.
func (s *LabelScore) Name() string { return s.PluginName }

// Score implements framework.ScorePlugin.
func (s *LabelScore) Score(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return LabelValueScore(ni.Node().Labels[s.Label]), nil
}

// ScoreExtensions implements framework.ScorePlugin: scores are already 0–100.
func (s *LabelScore) ScoreExtensions() framework.ScoreExtensions { return nil }

// LabelValueScore is label-score's arithmetic: the decimal value clamped to 100, 0 for
// anything that is not a non-negative integer.
func LabelValueScore(v string) int64 {
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
		if n > 100 {
			return 100
		}
	}
	return n
}

// Strategy scores nodes by CPU use: "spread" prefers the emptiest node, "binpack" the
// fullest one that still has room, as strategy-score does.
type Strategy struct {
	// PluginName is the plugin's name in the framework.
	PluginName string
	// Mode is "spread" or "binpack".
	Mode string
}

// Name implements framework.Plugin.
func (s *Strategy) Name() string { return s.PluginName }

// Score implements framework.ScorePlugin.
func (s *Strategy) Score(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return StrategyScore(s.Mode, ni.Requested.MilliCPU, ni.Allocatable.MilliCPU), nil
}

// ScoreExtensions implements framework.ScorePlugin: scores are already 0–100.
func (s *Strategy) ScoreExtensions() framework.ScoreExtensions { return nil }

// StrategyScore is strategy-score's arithmetic on millicores requested and allocatable.
func StrategyScore(mode string, requested, allocatable int64) int64 {
	if allocatable <= 0 {
		return 0
	}
	used := min(requested*100/allocatable, 100)
	if mode == "binpack" {
		return used
	}
	return 100 - used
}
