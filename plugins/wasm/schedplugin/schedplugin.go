// Package schedplugin makes a loaded WASM plugin a scheduler framework plugin. The guest
// wants one call per pod with a batch of nodes (sdk/ABI.md §7.5) while the framework calls
// Filter and Score once per node, so the adapter makes the batched guest call in PreFilter
// (over every candidate node) and PreScore (over the feasible nodes), keeps the answers in
// the CycleState, and answers Filter and Score by lookup.
package schedplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	v1 "k8s.io/api/core/v1"
)

// Caller is the part of a loaded *wasm.Plugin the adapter calls.
type Caller interface {
	// Filter runs the guest's filter hook over a batch of nodes.
	Filter(ctx context.Context, in *wasm.SchedulingInput) (*abi.FilterResponse, error)
	// Score runs the guest's score hook over a batch of nodes.
	Score(ctx context.Context, in *wasm.SchedulingInput) ([]int64, error)
	// WantsRequested tells whether the guest reads "requested".
	WantsRequested() bool
}

// Config describes one adapter.
type Config struct {
	// Name is the plugin's name in the framework, e.g. "wasm:tenant/spread"; it is the
	// plugin label of the scheduler's per-plugin metrics.
	Name string
	// Plugin is the loaded module.
	Plugin Caller
	// Filter and Score say which hooks the plugin object enables (at least one).
	Filter, Score bool
	// Ignore is failurePolicy Ignore: a failed call counts as passing (Filter) or as
	// contributing nothing (Score) instead of failing the scheduling attempt.
	Ignore bool
	// Nodes serializes node documents once per resourceVersion; share one per scheduler.
	Nodes *wasm.NodeCache
	// Logger receives failures ignored by policy (nil = slog.Default()).
	Logger *slog.Logger
}

// MinScore and MaxScore bound a guest's scores; others are clamped (ABI §7.5).
const (
	MinScore = framework.MinNodeScore
	MaxScore = framework.MaxNodeScore
)

// New returns the framework plugin for cfg: it implements PreFilter+Filter when the filter
// hook is enabled and PreScore+Score when the score hook is, and nothing else, so the
// framework places it only at those extension points.
func New(cfg Config) (framework.Plugin, error) {
	if cfg.Name == "" || cfg.Plugin == nil || cfg.Nodes == nil {
		return nil, errors.New("schedplugin: Name, Plugin and Nodes are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &adapter{cfg: cfg, log: cfg.Logger.With("plugin", cfg.Name),
		filterKey: framework.StateKey("wasm/filter/" + cfg.Name), scoreKey: framework.StateKey("wasm/score/" + cfg.Name)}
	switch {
	case cfg.Filter && cfg.Score:
		return &filterScorePlugin{a}, nil
	case cfg.Filter:
		return &filterPlugin{a}, nil
	case cfg.Score:
		return &scorePlugin{a}, nil
	}
	return nil, fmt.Errorf("schedplugin: %s enables neither filter nor score", cfg.Name)
}

// adapter holds what the three plugin shapes share.
type adapter struct {
	cfg                 Config
	log                 *slog.Logger
	filterKey, scoreKey framework.StateKey
}

// filterPlugin is a plugin with the filter hook only.
type filterPlugin struct{ a *adapter }

// scorePlugin is a plugin with the score hook only.
type scorePlugin struct{ a *adapter }

// filterScorePlugin is a plugin with both hooks.
type filterScorePlugin struct{ a *adapter }

// Name implements framework.Plugin.
func (p *filterPlugin) Name() string { return p.a.cfg.Name }

// PreFilter implements framework.PreFilterPlugin.
func (p *filterPlugin) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	return nil, p.a.preFilter(ctx, state, pod, nodes)
}

// Filter implements framework.FilterPlugin.
func (p *filterPlugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.a.filter(ctx, state, pod, ni)
}

// Name implements framework.Plugin.
func (p *scorePlugin) Name() string { return p.a.cfg.Name }

// PreScore implements framework.PreScorePlugin.
func (p *scorePlugin) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	return p.a.preScore(ctx, state, pod, nodes)
}

// Score implements framework.ScorePlugin.
func (p *scorePlugin) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.a.score(state, ni)
}

// ScoreExtensions implements framework.ScorePlugin: PreScore already clamps the guest's
// scores into [0, 100], so there is nothing to normalize.
func (p *scorePlugin) ScoreExtensions() framework.ScoreExtensions { return nil }

// Name implements framework.Plugin.
func (p *filterScorePlugin) Name() string { return p.a.cfg.Name }

// PreFilter implements framework.PreFilterPlugin.
func (p *filterScorePlugin) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	return nil, p.a.preFilter(ctx, state, pod, nodes)
}

// Filter implements framework.FilterPlugin.
func (p *filterScorePlugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.a.filter(ctx, state, pod, ni)
}

// PreScore implements framework.PreScorePlugin.
func (p *filterScorePlugin) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	return p.a.preScore(ctx, state, pod, nodes)
}

// Score implements framework.ScorePlugin.
func (p *filterScorePlugin) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.a.score(state, ni)
}

// ScoreExtensions implements framework.ScorePlugin (see scorePlugin.ScoreExtensions).
func (p *filterScorePlugin) ScoreExtensions() framework.ScoreExtensions { return nil }

// podKey keeps the pod's JSON for the cycle, shared by every WASM plugin of the profile.
const podKey framework.StateKey = "wasm/pod"

// podDoc is the pod serialized once per cycle. It is immutable, so Clone shares it.
type podDoc struct{ b []byte }

// Clone implements framework.StateData.
func (d *podDoc) Clone() framework.StateData { return d }

// filterResult is the filter answer of one cycle: the rejected nodes and their reasons.
// Only rejections are kept because Filter treats every other node of the cycle as
// passing, and most nodes pass most filters.
type filterResult struct{ rejected map[string]string }

// Clone implements framework.StateData (immutable: shared).
func (r *filterResult) Clone() framework.StateData { return r }

// scoreResult is the clamped score of each feasible node of one cycle.
type scoreResult struct{ scores map[string]int64 }

// Clone implements framework.StateData (immutable: shared).
func (r *scoreResult) Clone() framework.StateData { return r }

func (a *adapter) podJSON(state *framework.CycleState, pod *v1.Pod) ([]byte, error) {
	if d, err := framework.ReadAs[*podDoc](state, podKey); err == nil {
		return d.b, nil
	}
	b, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	state.Write(podKey, &podDoc{b: b})
	return b, nil
}

// input builds the guest's request for nodes.
func (a *adapter) input(state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*wasm.SchedulingInput, error) {
	pb, err := a.podJSON(state, pod)
	if err != nil {
		return nil, err
	}
	// The cache holds every node this scheduler has sent: the cluster's size, which bounds
	// the guest's node table (Score gets a different subset of the nodes for each pod).
	in := &wasm.SchedulingInput{Pod: pb, Nodes: make([]*wasm.NodeDocument, 0, len(nodes)), ClusterNodes: a.cfg.Nodes.Len()}
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil {
			return nil, errors.New("a candidate node has no Node object")
		}
		d, err := a.cfg.Nodes.Document(n)
		if err != nil {
			return nil, err
		}
		in.Nodes = append(in.Nodes, d)
	}
	if a.cfg.Plugin.WantsRequested() {
		in.Requested = make([]abi.Resources, len(nodes))
		for i, ni := range nodes {
			in.Requested[i] = requested(ni)
		}
	}
	return in, nil
}

// requested is what the pods on a node request, in the units of ABI §7.5.
func requested(ni *framework.NodeInfo) abi.Resources {
	r := abi.Resources{"pods": int64(len(ni.Pods))}
	if q := ni.Requested; q != nil {
		r["cpu"], r["memory"] = q.MilliCPU, q.Memory
		if q.EphemeralStorage != 0 {
			r[string(v1.ResourceEphemeralStorage)] = q.EphemeralStorage
		}
		for name, v := range q.ScalarResources {
			r[string(name)] = v
		}
	}
	return r
}

// failed turns a failed guest call into the status the scheduler acts on: under
// failurePolicy Ignore the plugin steps aside for this pod (Skip), otherwise the attempt
// fails with Error and the pod is retried with backoff.
func (a *adapter) failed(hook string, pod *v1.Pod, err error) *framework.Status {
	if a.cfg.Ignore {
		a.log.Warn("wasm scheduling plugin failed; ignored by failurePolicy", "hook", hook,
			"pod", pod.Namespace+"/"+pod.Name, "kind", string(wasm.KindOf(err)), "err", err)
		return framework.NewStatus(framework.Skip)
	}
	return framework.AsStatus(fmt.Errorf("%s %s: %w", a.cfg.Name, hook, err))
}

func (a *adapter) preFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	in, err := a.input(state, pod, nodes)
	if err != nil {
		return a.failed(abi.HookFilter, pod, err)
	}
	resp, err := a.cfg.Plugin.Filter(ctx, in)
	if err != nil {
		return a.failed(abi.HookFilter, pod, err)
	}
	res := &filterResult{rejected: map[string]string{}}
	for i, ok := range resp.Pass {
		if ok {
			continue
		}
		reason := ""
		if resp.Reasons != nil {
			reason = resp.Reasons[i]
		}
		if reason == "" {
			reason = "node(s) rejected by " + a.cfg.Name
		}
		res.rejected[in.Nodes[i].Name] = reason
	}
	state.Write(a.filterKey, res)
	return nil
}

func (a *adapter) filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	res, err := framework.ReadAs[*filterResult](state, a.filterKey)
	if err != nil {
		// PreFilter did not run for this state (a caller running Filter alone): ask the
		// guest about this one node.
		if st := a.preFilter(ctx, state, pod, []*framework.NodeInfo{ni}); !st.IsSuccess() {
			if st.IsSkip() {
				return nil
			}
			return st
		}
		if res, err = framework.ReadAs[*filterResult](state, a.filterKey); err != nil {
			return framework.AsStatus(err)
		}
	}
	if reason, ok := res.rejected[ni.Node().Name]; ok {
		return framework.NewStatus(framework.Unschedulable, reason)
	}
	return nil
}

func (a *adapter) preScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	in, err := a.input(state, pod, nodes)
	if err != nil {
		return a.failed(abi.HookScore, pod, err)
	}
	scores, err := a.cfg.Plugin.Score(ctx, in)
	if err != nil {
		return a.failed(abi.HookScore, pod, err)
	}
	res := &scoreResult{scores: make(map[string]int64, len(scores))}
	for i, s := range scores {
		res.scores[in.Nodes[i].Name] = min(max(s, MinScore), MaxScore)
	}
	state.Write(a.scoreKey, res)
	return nil
}

func (a *adapter) score(state *framework.CycleState, ni *framework.NodeInfo) (int64, *framework.Status) {
	res, err := framework.ReadAs[*scoreResult](state, a.scoreKey)
	if err != nil {
		return 0, framework.AsStatus(fmt.Errorf("%s: score without PreScore: %w", a.cfg.Name, err))
	}
	s, ok := res.scores[ni.Node().Name]
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: node %s was not scored in PreScore", a.cfg.Name, ni.Node().Name))
	}
	return s, nil
}
