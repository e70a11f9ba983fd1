// Package schedplugin makes a loaded WASM plugin a scheduler framework plugin. The guest
// wants batches of nodes (sdk/ABI.md §7.5), and the adapter is a batch plugin of the
// framework: the scheduler's Filter walk hands it blocks of nodes (FilterBatch, one guest
// call per block) and RunScorePlugins all feasible nodes (ScoreBatch, one call). Filter
// and Score for single nodes (a nominated node, preemption's dry runs, callers outside
// the framework's walk) batch too: Filter asks the guest about a window of PreFilter's
// candidate list starting at the node asked about, and Score scores PreScore's nodes in
// one call and answers by lookup.
package schedplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

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
	// WantsFullPods tells whether the guest asked for whole Pods, not compact ones.
	WantsFullPods() bool
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
	// Logger receives failures ignored by policy (nil = discarded).
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
		cfg.Logger = slog.New(slog.DiscardHandler)
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
	// positions maps node names to their index in the last PreFilter node list; the
	// scheduler passes the same snapshot list cycle after cycle, so it is rebuilt only
	// when a lookup finds another node at the remembered index.
	positions atomic.Pointer[map[string]int]
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

// FilterBatch implements framework.BatchFilterPlugin.
func (p *filterPlugin) FilterBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []*framework.Status) {
	p.a.filterBatch(ctx, state, pod, nodes, out)
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

// ScoreBatch implements framework.BatchScorePlugin.
func (p *scorePlugin) ScoreBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []int64) *framework.Status {
	return p.a.scoreBatch(ctx, state, pod, nodes, out)
}

// ScoreExtensions implements framework.ScorePlugin: the adapter clamps the guest's scores
// into [0, 100] as it reads them, so there is nothing to normalize.
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

// FilterBatch implements framework.BatchFilterPlugin.
func (p *filterScorePlugin) FilterBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []*framework.Status) {
	p.a.filterBatch(ctx, state, pod, nodes, out)
}

// PreScore implements framework.PreScorePlugin.
func (p *filterScorePlugin) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	return p.a.preScore(ctx, state, pod, nodes)
}

// Score implements framework.ScorePlugin.
func (p *filterScorePlugin) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.a.score(state, ni)
}

// ScoreBatch implements framework.BatchScorePlugin.
func (p *filterScorePlugin) ScoreBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []int64) *framework.Status {
	return p.a.scoreBatch(ctx, state, pod, nodes, out)
}

// ScoreExtensions implements framework.ScorePlugin (see scorePlugin.ScoreExtensions).
func (p *filterScorePlugin) ScoreExtensions() framework.ScoreExtensions { return nil }

// podKey and fullPodKey keep the pod's compact and whole JSON for the cycle, shared by
// every WASM plugin of the profile.
const (
	podKey     framework.StateKey = "wasm/pod"
	fullPodKey framework.StateKey = "wasm/pod/full"
)

// podDoc is the pod serialized once per cycle. It is immutable, so Clone shares it.
type podDoc struct{ b []byte }

// Clone implements framework.StateData.
func (d *podDoc) Clone() framework.StateData { return d }

// filterResult is the filter state of one cycle: the candidate nodes, which of them the
// guest has judged, and the rejected ones with their reasons (most nodes pass most
// filters). Filter calls arrive from the framework's parallel workers; mu serializes the
// guest calls, so one instance (and its node table) serves the cycle.
type filterResult struct {
	ctx   context.Context // PreFilter's: not cancelled when the framework stops early
	pod   *v1.Pod
	state *framework.CycleState
	nodes []*framework.NodeInfo

	mu       sync.Mutex
	judged   []bool
	rejected map[string]string
	failed   *framework.Status // a failed guest call: every later Filter answers it
	ignored  bool              // a failed call under failurePolicy Ignore: every node passes
}

// Clone implements framework.StateData. The state is shared by clones (it is safe for
// concurrent use and only ever completed), as the batched answer was before.
func (r *filterResult) Clone() framework.StateData { return r }

// scoreResult serves per-node Score calls (a caller that does not use ScoreBatch): the
// first one scores PreScore's nodes in one guest call, so a guest that ranks nodes
// against each other sees them all, as it does through ScoreBatch.
type scoreResult struct {
	ctx   context.Context
	pod   *v1.Pod
	nodes []*framework.NodeInfo

	once   sync.Once
	scores map[string]int64
	st     *framework.Status
}

// Clone implements framework.StateData (safe for concurrent use: shared).
func (r *scoreResult) Clone() framework.StateData { return r }

// podJSON is the pod document the guest asked for (ABI §7.5), serialized once per cycle.
func (a *adapter) podJSON(state *framework.CycleState, pod *v1.Pod) ([]byte, error) {
	key, full := podKey, a.cfg.Plugin.WantsFullPods()
	if full {
		key = fullPodKey
	}
	if d, err := framework.ReadAs[*podDoc](state, key); err == nil {
		return d.b, nil
	}
	var b []byte
	var err error
	if full {
		b, err = json.Marshal(pod)
	} else {
		b, err = wasm.CompactPodJSON(pod)
	}
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	state.Write(key, &podDoc{b: b})
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
		d, ok := ni.Derived(a.cfg.Nodes).(*wasm.NodeDocument)
		if !ok {
			n := ni.Node()
			if n == nil {
				return nil, errors.New("a candidate node has no Node object")
			}
			var err error
			if d, err = a.cfg.Nodes.Document(n); err != nil {
				return nil, err
			}
			ni.StoreDerived(a.cfg.Nodes, d)
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
		wasm.BudgetOf(a.cfg.Plugin).Log(context.Background(), a.log, a.cfg.Name, slog.LevelWarn, "wasm scheduling plugin failed; ignored by failurePolicy", "hook", hook,
			"pod", pod.Namespace+"/"+pod.Name, "kind", string(wasm.KindOf(err)), "err", err)
		return framework.NewStatus(framework.Skip)
	}
	return framework.AsStatus(fmt.Errorf("%s %s: %w", a.cfg.Name, hook, err))
}

func (a *adapter) preFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	if _, err := a.podJSON(state, pod); err != nil {
		return a.failed(abi.HookFilter, pod, err)
	}
	a.position(nodes, "") // build the index outside the parallel Filter calls
	state.Write(a.filterKey, &filterResult{ctx: ctx, pod: pod, state: state, nodes: nodes,
		judged: make([]bool, len(nodes)), rejected: map[string]string{}})
	return nil
}

// filterWindow is how many candidate nodes one guest filter call covers at most. A call
// costs a fixed ~30 µs and a few µs per node in a Go guest, so windows are small: once
// the framework's walk has found enough feasible nodes it stops, and nodes judged beyond
// that point are wasted (measured at 5,000 nodes: 5.1 ms per pod with 256, 6.5–7.7 ms
// with 1,136, 22 ms with every node).
func filterWindow(n int) int { return min(n, 256) }

// position returns the index of the node named name in nodes, or -1; name "" only
// makes sure the index is built for nodes.
func (a *adapter) position(nodes []*framework.NodeInfo, name string) int {
	if m := a.positions.Load(); m != nil {
		i, ok := (*m)[name]
		switch {
		case ok && i < len(nodes) && nodes[i].Node().Name == name:
			return i
		case !ok && len(*m) == len(nodes) && (len(nodes) == 0 || (*m)[nodes[0].Node().Name] == 0):
			// Most likely the same list, without that node (a lookup that finds
			// another node at a remembered index rebuilds it).
			return -1
		}
	}
	m := make(map[string]int, len(nodes))
	for i, ni := range nodes {
		if n := ni.Node(); n != nil {
			m[n.Name] = i
		}
	}
	a.positions.Store(&m)
	if i, ok := m[name]; ok && name != "" {
		return i
	}
	return -1
}

// cycle returns the filter state PreFilter wrote, running PreFilter for nodes if it did
// not (a caller running Filter alone); nil and a nil status mean the plugin skips.
func (a *adapter) cycle(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*filterResult, *framework.Status) {
	if res, err := framework.ReadAs[*filterResult](state, a.filterKey); err == nil {
		return res, nil
	}
	if st := a.preFilter(ctx, state, pod, nodes); !st.IsSuccess() {
		if st.IsSkip() {
			return nil, nil
		}
		return nil, st
	}
	res, err := framework.ReadAs[*filterResult](state, a.filterKey)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return res, nil
}

// settled reports a cycle whose guest call failed: a status every node gets, or ignore
// when every node passes under failurePolicy Ignore. Callers hold res.mu.
func (res *filterResult) settled() (st *framework.Status, done bool) {
	return res.failed, res.failed != nil || res.ignored
}

// fail records a failed guest call for the rest of the cycle and returns what the
// node(s) asked about get: nil under failurePolicy Ignore. Callers hold res.mu.
func (a *adapter) fail(res *filterResult, err error) *framework.Status {
	st := a.failed(abi.HookFilter, res.pod, err)
	if st.IsSkip() {
		res.ignored = true
		return nil
	}
	res.failed = st
	return st
}

func (a *adapter) filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	res, st := a.cycle(ctx, state, pod, []*framework.NodeInfo{ni})
	if res == nil {
		return st
	}
	name := ni.Node().Name
	res.mu.Lock()
	defer res.mu.Unlock()
	if st, done := res.settled(); done {
		return st
	}
	i := a.position(res.nodes, name)
	if i >= 0 && res.nodes[i] != ni && res.nodes[i].Node() != ni.Node() {
		i = -1 // another NodeInfo of the same name (a preemption dry run): judge it alone
	}
	if i < 0 || !res.judged[i] {
		if err := res.ctx.Err(); err != nil {
			return framework.AsStatus(fmt.Errorf("%s filter: %w", a.cfg.Name, err))
		}
		if ctx.Err() != nil {
			// The framework has stopped its walk (enough feasible nodes, or an error)
			// and discards what the remaining calls answer: do not ask the guest.
			return nil
		}
		var batch []*framework.NodeInfo
		if i < 0 {
			batch = []*framework.NodeInfo{ni}
		} else {
			// The unjudged run of nodes from i on, wrapping as the framework's walk does.
			n := len(res.nodes)
			w := filterWindow(n)
			for j := 0; j < w && !res.judged[(i+j)%n]; j++ {
				res.judged[(i+j)%n] = true
				batch = append(batch, res.nodes[(i+j)%n])
			}
		}
		if err := a.callFilter(res, batch, func(j int, reason string) { res.rejected[batch[j].Node().Name] = reason }); err != nil {
			return a.fail(res, err)
		}
	}
	if reason, ok := res.rejected[name]; ok {
		return framework.NewStatus(framework.Unschedulable, reason)
	}
	return nil
}

// filterBatch judges a block of the framework's walk in one guest call. Blocks arrive
// from the framework's parallel workers, each call on its own instance.
func (a *adapter) filterBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []*framework.Status) {
	res, st := a.cycle(ctx, state, pod, nodes)
	if res != nil {
		var done bool
		res.mu.Lock()
		st, done = res.settled()
		res.mu.Unlock()
		if !done {
			if err := res.ctx.Err(); err != nil {
				st = framework.AsStatus(fmt.Errorf("%s filter: %w", a.cfg.Name, err))
			} else if ctx.Err() != nil {
				return // the walk has stopped and discards this block
			} else if err := a.callFilter(res, nodes, func(i int, reason string) {
				out[i] = framework.NewStatus(framework.Unschedulable, reason)
			}); err != nil {
				res.mu.Lock()
				st = a.fail(res, err)
				res.mu.Unlock()
			}
		}
	}
	if st != nil {
		for i := range out {
			out[i] = st
		}
	}
}

// callFilter asks the guest about batch (with the cycle's context: the walk's is
// cancelled when it has enough nodes, which must not interrupt a call half-way) and
// calls reject for each node it rejects.
func (a *adapter) callFilter(res *filterResult, batch []*framework.NodeInfo, reject func(i int, reason string)) error {
	in, err := a.input(res.state, res.pod, batch)
	if err != nil {
		return err
	}
	resp, err := a.cfg.Plugin.Filter(res.ctx, in)
	if err != nil {
		return err
	}
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
		reject(i, reason)
	}
	return nil
}

func (a *adapter) preScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	if _, err := a.podJSON(state, pod); err != nil {
		return a.failed(abi.HookScore, pod, err)
	}
	state.Write(a.scoreKey, &scoreResult{ctx: ctx, pod: pod, nodes: nodes})
	return nil
}

// scoreBatch asks the guest to score nodes in one call. Under failurePolicy Ignore a
// failed call leaves every score 0: the plugin then ranks no node above another.
func (a *adapter) scoreBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []int64) *framework.Status {
	in, err := a.input(state, pod, nodes)
	if err == nil {
		var scores []int64
		if scores, err = a.cfg.Plugin.Score(ctx, in); err == nil {
			for i, s := range scores {
				out[i] = min(max(s, MinScore), MaxScore)
			}
			return nil
		}
	}
	if st := a.failed(abi.HookScore, pod, err); !st.IsSkip() {
		return st
	}
	clear(out)
	return nil
}

func (a *adapter) score(state *framework.CycleState, ni *framework.NodeInfo) (int64, *framework.Status) {
	res, err := framework.ReadAs[*scoreResult](state, a.scoreKey)
	if err != nil {
		return 0, framework.AsStatus(fmt.Errorf("%s: score without PreScore: %w", a.cfg.Name, err))
	}
	res.once.Do(func() {
		out := make([]int64, len(res.nodes))
		if res.st = a.scoreBatch(res.ctx, state, res.pod, res.nodes, out); res.st != nil {
			return
		}
		res.scores = make(map[string]int64, len(out))
		for i, s := range out {
			res.scores[res.nodes[i].Node().Name] = s
		}
	})
	if res.st != nil {
		return 0, res.st
	}
	s, ok := res.scores[ni.Node().Name]
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: node %s was not scored in PreScore", a.cfg.Name, ni.Node().Name))
	}
	return s, nil
}
