package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/metrics"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Extension point names (metric label values, as kube-scheduler's).
const (
	// PointPreFilter is the PreFilter extension point.
	PointPreFilter = "PreFilter"
	// PointFilter is the Filter extension point.
	PointFilter = "Filter"
	// PointPostFilter is the PostFilter extension point.
	PointPostFilter = "PostFilter"
	// PointPreScore is the PreScore extension point.
	PointPreScore = "PreScore"
	// PointScore is the Score extension point.
	PointScore = "Score"
	// PointNormalize is NormalizeScore.
	PointNormalize = "ScoreExtensionNormalize"
	// PointReserve is Reserve.
	PointReserve = "Reserve"
	// PointUnreserve is Unreserve.
	PointUnreserve = "Unreserve"
	// PointPermit is Permit.
	PointPermit = "Permit"
	// PointPreBind is PreBind.
	PointPreBind = "PreBind"
	// PointBind is Bind.
	PointBind = "Bind"
	// PointPostBind is PostBind.
	PointPostBind = "PostBind"
)

// maxPermitTimeout caps a Permit plugin's wait, as Kubernetes does.
const maxPermitTimeout = 15 * time.Minute

// Extension is an out-of-tree plugin joining a profile at run time (the WASM adapter's
// hook). Plugin implements any subset of the extension-point interfaces; it is appended
// after the profile's configured plugins at each point it implements.
type Extension struct {
	// Plugin is the plugin; its Name() identifies the extension.
	Plugin Plugin
	// Weight is its Score weight (0 = 1).
	Weight int32
	// Namespace, when set, restricts the plugin to pods of that namespace (tenant plugins);
	// for other pods it is neither called nor counted.
	Namespace string
}

type entry[T Plugin] struct {
	p      T
	weight int64
	ns     string
}

func (e entry[T]) applies(pod *v1.Pod) bool { return e.ns == "" || e.ns == pod.Namespace }

// PluginSet is an immutable set of plugins per extension point. A scheduling cycle takes
// one PluginSet at its start (Framework.Plugins) and uses it until its binding cycle
// ends, so swapping plugins never affects an in-flight pod.
type PluginSet struct {
	fw         *Framework
	queueSort  QueueSortPlugin
	preFilter  []entry[PreFilterPlugin]
	filter     []entry[FilterPlugin]
	postFilter []entry[PostFilterPlugin]
	preScore   []entry[PreScorePlugin]
	score      []entry[ScorePlugin]
	reserve    []entry[ReservePlugin]
	permit     []entry[PermitPlugin]
	preBind    []entry[PreBindPlugin]
	bind       []entry[BindPlugin]
	postBind   []entry[PostBindPlugin]
	// byName finds any configured plugin or extension by name, whichever points it
	// implements.
	byName map[string]Plugin
}

// Options are the framework's dependencies.
type Options struct {
	// ClientSet reaches the API server.
	ClientSet kubernetes.Interface
	// InformerFactory is the shared informer factory.
	InformerFactory informers.SharedInformerFactory
	// EventRecorder records FailedScheduling/Scheduled events.
	EventRecorder events.EventRecorder
	// Metrics records plugin latencies (nil = none).
	Metrics *metrics.Metrics
	// Parallelism bounds the goroutines of Filter/Score (0 = 16).
	Parallelism int
	// PercentageOfNodesToScore is the profile's (or global) setting (nil/0 = adaptive).
	PercentageOfNodesToScore *int32
}

// Framework is one profile: its configured plugins, the out-of-tree extensions, and the
// Handle plugins use. It is safe for concurrent use.
type Framework struct {
	name     string
	opts     Options
	parallel Parallelizer
	snapshot atomic.Pointer[Snapshot]

	mu         sync.Mutex
	base       *PluginSet
	extensions []Extension
	current    atomic.Pointer[PluginSet]

	waitingMu sync.Mutex
	waiting   map[types.UID]*waitingPod
}

// NewFramework instantiates the plugins of one profile. Each plugin is built once (with
// its args from pluginConfig) and placed at every extension point the resolved
// configuration lists it for; MultiPoint plugins go to every point they implement.
func NewFramework(ctx context.Context, name string, registry Registry, plugins *Plugins, pluginConfig []PluginConfig, opts Options) (*Framework, error) {
	fw := &Framework{name: name, opts: opts, parallel: NewParallelizer(opts.Parallelism), waiting: map[types.UID]*waitingPod{}}
	fw.snapshot.Store(NewEmptySnapshot())
	if plugins == nil {
		plugins = &Plugins{}
	}
	args := map[string]PluginConfig{}
	for _, pc := range pluginConfig {
		args[pc.Name] = pc
	}
	instances := map[string]Plugin{}
	get := func(n string) (Plugin, error) {
		if p, ok := instances[n]; ok {
			return p, nil
		}
		f, ok := registry[n]
		if !ok {
			return nil, fmt.Errorf("profile %q: plugin %q: %w", name, n, ErrNotFound)
		}
		p, err := f(ctx, args[n].Args, fw)
		if err != nil {
			return nil, fmt.Errorf("profile %q: initializing plugin %q: %w", name, n, err)
		}
		instances[n] = p
		return p, nil
	}
	ps := &PluginSet{fw: fw, byName: map[string]Plugin{}}
	type point struct {
		name string
		list PluginList
		add  func(p Plugin, w int32) bool
	}
	points := []point{
		{PointPreFilter, plugins.PreFilter, func(p Plugin, w int32) bool { return addEntry(&ps.preFilter, p, w, "") }},
		{PointFilter, plugins.Filter, func(p Plugin, w int32) bool { return addEntry(&ps.filter, p, w, "") }},
		{PointPostFilter, plugins.PostFilter, func(p Plugin, w int32) bool { return addEntry(&ps.postFilter, p, w, "") }},
		{PointPreScore, plugins.PreScore, func(p Plugin, w int32) bool { return addEntry(&ps.preScore, p, w, "") }},
		{PointScore, plugins.Score, func(p Plugin, w int32) bool { return addEntry(&ps.score, p, w, "") }},
		{PointReserve, plugins.Reserve, func(p Plugin, w int32) bool { return addEntry(&ps.reserve, p, w, "") }},
		{PointPermit, plugins.Permit, func(p Plugin, w int32) bool { return addEntry(&ps.permit, p, w, "") }},
		{PointPreBind, plugins.PreBind, func(p Plugin, w int32) bool { return addEntry(&ps.preBind, p, w, "") }},
		{PointBind, plugins.Bind, func(p Plugin, w int32) bool { return addEntry(&ps.bind, p, w, "") }},
		{PointPostBind, plugins.PostBind, func(p Plugin, w int32) bool { return addEntry(&ps.postBind, p, w, "") }},
	}
	// QueueSort: explicit list first, else the first MultiPoint plugin implementing it.
	queueSortRefs := append(append([]PluginRef(nil), plugins.QueueSort.Enabled...), plugins.MultiPoint.Enabled...)
	for _, ref := range queueSortRefs {
		if disabledIn(plugins.QueueSort, ref.Name) {
			continue
		}
		p, err := get(ref.Name)
		if err != nil {
			return nil, err
		}
		if qs, ok := p.(QueueSortPlugin); ok {
			ps.queueSort = qs
			ps.byName[qs.Name()] = qs
			break
		}
	}
	for _, pt := range points {
		seen := map[string]bool{}
		explicit := map[string]PluginRef{}
		for _, ref := range pt.list.Enabled {
			explicit[ref.Name] = ref
		}
		for _, ref := range plugins.MultiPoint.Enabled {
			if disabledIn(pt.list, ref.Name) || seen[ref.Name] {
				continue
			}
			if ex, ok := explicit[ref.Name]; ok {
				// A point-specific entry wins over MultiPoint (for its weight) but keeps
				// the MultiPoint position.
				ref = ex
			}
			p, err := get(ref.Name)
			if err != nil {
				return nil, err
			}
			if pt.add(p, ref.Weight) {
				ps.byName[ref.Name] = p
			}
			seen[ref.Name] = true
		}
		for _, ref := range pt.list.Enabled {
			if seen[ref.Name] {
				continue
			}
			p, err := get(ref.Name)
			if err != nil {
				return nil, err
			}
			if !pt.add(p, ref.Weight) {
				return nil, fmt.Errorf("profile %q: plugin %q does not implement %s", name, ref.Name, pt.name)
			}
			ps.byName[ref.Name] = p
			seen[ref.Name] = true
		}
	}
	if ps.queueSort == nil {
		return nil, fmt.Errorf("profile %q: no QueueSort plugin", name)
	}
	if len(ps.bind) == 0 {
		return nil, fmt.Errorf("profile %q: no Bind plugin", name)
	}
	fw.base = ps
	fw.current.Store(ps)
	return fw, nil
}

func disabledIn(l PluginList, name string) bool {
	for _, d := range l.Disabled {
		if d.Name == name || d.Name == "*" {
			return true
		}
	}
	return false
}

// addEntry appends p to list if it implements T.
func addEntry[T Plugin](list *[]entry[T], p Plugin, w int32, ns string) bool {
	t, ok := p.(T)
	if !ok {
		return false
	}
	if w <= 0 {
		w = 1
	}
	*list = append(*list, entry[T]{p: t, weight: int64(w), ns: ns})
	return true
}

// Name is the profile's schedulerName.
func (f *Framework) Name() string { return f.name }

// Plugins returns the plugin set to use for one whole scheduling + binding cycle.
func (f *Framework) Plugins() *PluginSet { return f.current.Load() }

// SetExtension adds or atomically replaces (by plugin name) an out-of-tree plugin. Cycles
// already running keep the set they started with; the next cycle sees the new one.
func (f *Framework) SetExtension(ext Extension) error {
	if ext.Plugin == nil {
		return errors.New("extension without plugin")
	}
	name := ext.Plugin.Name()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.base.byName[name]; ok {
		return fmt.Errorf("profile %q: extension %q clashes with a configured plugin", f.name, name)
	}
	exts := make([]Extension, 0, len(f.extensions)+1)
	replaced := false
	for _, e := range f.extensions {
		if e.Plugin.Name() == name {
			e = ext
			replaced = true
		}
		exts = append(exts, e)
	}
	if !replaced {
		exts = append(exts, ext)
	}
	ps, err := f.build(exts)
	if err != nil {
		return err
	}
	f.extensions = exts
	f.current.Store(ps)
	return nil
}

// RemoveExtension removes an out-of-tree plugin (false if it was not there).
func (f *Framework) RemoveExtension(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	exts := make([]Extension, 0, len(f.extensions))
	for _, e := range f.extensions {
		if e.Plugin.Name() != name {
			exts = append(exts, e)
		}
	}
	if len(exts) == len(f.extensions) {
		return false
	}
	ps, _ := f.build(exts)
	f.extensions = exts
	f.current.Store(ps)
	return true
}

// ExtensionNames lists the out-of-tree plugins currently in the profile.
func (f *Framework) ExtensionNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.extensions))
	for _, e := range f.extensions {
		out = append(out, e.Plugin.Name())
	}
	return out
}

func (f *Framework) build(exts []Extension) (*PluginSet, error) {
	b := f.base
	ps := &PluginSet{
		fw: f, queueSort: b.queueSort,
		preFilter: clip(b.preFilter), filter: clip(b.filter), postFilter: clip(b.postFilter),
		preScore: clip(b.preScore), score: clip(b.score), reserve: clip(b.reserve), permit: clip(b.permit),
		preBind: clip(b.preBind), bind: clip(b.bind), postBind: clip(b.postBind),
		byName: maps.Clone(b.byName),
	}
	for _, e := range exts {
		p, w, ns := e.Plugin, e.Weight, e.Namespace
		any := addEntry(&ps.preFilter, p, w, ns)
		any = addEntry(&ps.filter, p, w, ns) || any
		any = addEntry(&ps.postFilter, p, w, ns) || any
		any = addEntry(&ps.preScore, p, w, ns) || any
		any = addEntry(&ps.score, p, w, ns) || any
		any = addEntry(&ps.reserve, p, w, ns) || any
		any = addEntry(&ps.permit, p, w, ns) || any
		any = addEntry(&ps.preBind, p, w, ns) || any
		any = addEntry(&ps.bind, p, w, ns) || any
		any = addEntry(&ps.postBind, p, w, ns) || any
		if !any {
			return nil, fmt.Errorf("extension %q implements no extension point", p.Name())
		}
		ps.byName[p.Name()] = p
	}
	return ps, nil
}

// clip copies a slice so appends never alias the base set.
func clip[T any](s []T) []T { return append([]T(nil), s...) }

// ClientSet implements Handle.
func (f *Framework) ClientSet() kubernetes.Interface { return f.opts.ClientSet }

// SharedInformerFactory implements Handle.
func (f *Framework) SharedInformerFactory() informers.SharedInformerFactory {
	return f.opts.InformerFactory
}

// EventRecorder implements Handle.
func (f *Framework) EventRecorder() events.EventRecorder { return f.opts.EventRecorder }

// SnapshotSharedLister implements Handle.
func (f *Framework) SnapshotSharedLister() NodeInfoLister { return f.snapshot.Load() }

// SetSnapshot publishes the snapshot of the cycle about to run.
func (f *Framework) SetSnapshot(s *Snapshot) { f.snapshot.Store(s) }

// Parallelizer implements Handle.
func (f *Framework) Parallelizer() Parallelizer { return f.parallel }

// ProfileName implements Handle.
func (f *Framework) ProfileName() string { return f.name }

// PercentageOfNodesToScore is the profile's setting (nil = use the global/adaptive one).
func (f *Framework) PercentageOfNodesToScore() *int32 { return f.opts.PercentageOfNodesToScore }

// Metrics returns the metrics the framework records into (may be nil).
func (f *Framework) Metrics() *metrics.Metrics { return f.opts.Metrics }

// PluginNames lists the plugins at each extension point (diagnostics and tests).
func (ps *PluginSet) PluginNames() map[string][]string {
	out := map[string][]string{}
	add := func(point string, n string) { out[point] = append(out[point], n) }
	if ps.queueSort != nil {
		add("QueueSort", ps.queueSort.Name())
	}
	for _, e := range ps.preFilter {
		add(PointPreFilter, e.p.Name())
	}
	for _, e := range ps.filter {
		add(PointFilter, e.p.Name())
	}
	for _, e := range ps.postFilter {
		add(PointPostFilter, e.p.Name())
	}
	for _, e := range ps.preScore {
		add(PointPreScore, e.p.Name())
	}
	for _, e := range ps.score {
		add(PointScore, fmt.Sprintf("%s:%d", e.p.Name(), e.weight))
	}
	for _, e := range ps.reserve {
		add(PointReserve, e.p.Name())
	}
	for _, e := range ps.permit {
		add(PointPermit, e.p.Name())
	}
	for _, e := range ps.preBind {
		add(PointPreBind, e.p.Name())
	}
	for _, e := range ps.bind {
		add(PointBind, e.p.Name())
	}
	for _, e := range ps.postBind {
		add(PointPostBind, e.p.Name())
	}
	return out
}

// QueueSortFunc returns the Less of the QueueSort plugin.
func (ps *PluginSet) QueueSortFunc() func(a, b *QueuedPodInfo) bool { return ps.queueSort.Less }

// HasFilterPlugins reports whether any Filter plugin is configured.
func (ps *PluginSet) HasFilterPlugins() bool { return len(ps.filter) > 0 }

// HasScorePlugins reports whether any Score plugin is configured.
func (ps *PluginSet) HasScorePlugins() bool { return len(ps.score) > 0 }

// HasPostFilterPlugins reports whether any PostFilter plugin is configured.
func (ps *PluginSet) HasPostFilterPlugins() bool { return len(ps.postFilter) > 0 }

func (ps *PluginSet) observe(state *CycleState, plugin, point string, st *Status, start time.Time) {
	if !start.IsZero() {
		ps.fw.opts.Metrics.ObservePlugin(plugin, point, st.Code().String(), time.Since(start))
	}
}

// now reads the clock only in cycles that sample plugin latencies: Filter and Score run
// per node and plugin, so an unconditional clock read costs more than most plugins.
func now(state *CycleState) time.Time {
	if state != nil && state.RecordPluginMetrics {
		return time.Now()
	}
	return time.Time{}
}

// RunPreFilterPlugins runs PreFilter; a rejection stops the cycle. Results are intersected.
func (ps *PluginSet) RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) (res *PreFilterResult, st *Status) {
	start := time.Now()
	defer func() {
		ps.fw.opts.Metrics.ObserveExtensionPoint(PointPreFilter, st.Code().String(), ps.fw.name, time.Since(start))
	}()
	state.plugins = ps
	for _, e := range ps.preFilter {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		r, s := e.p.PreFilter(ctx, state, pod, nodes)
		ps.observe(state, e.p.Name(), PointPreFilter, s, t)
		switch {
		case s.IsSkip():
			state.SkipFilterPlugins.Insert(e.p.Name())
			continue
		case s.IsSuccess():
		case s.IsRejected():
			return nil, s.WithPlugin(e.p.Name())
		default:
			return nil, AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
		if r != nil && r.NodeNames != nil {
			if res == nil {
				res = &PreFilterResult{NodeNames: r.NodeNames.Clone()}
			} else {
				res.NodeNames = res.NodeNames.Intersection(r.NodeNames)
			}
		}
	}
	return res, nil
}

// RunFilterPlugins runs every Filter on one node and stops at the first rejection.
func (ps *PluginSet) RunFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, ni *NodeInfo) *Status {
	for _, e := range ps.filter {
		if !e.applies(pod) || state.SkipFilterPlugins.Has(e.p.Name()) {
			continue
		}
		t := now(state)
		s := e.p.Filter(ctx, state, pod, ni)
		ps.observe(state, e.p.Name(), PointFilter, s, t)
		if !s.IsSuccess() {
			return filterStatus(e.p.Name(), s)
		}
	}
	return nil
}

// filterStatus is what a walk records for a node plugin rejected or failed on.
func filterStatus(plugin string, s *Status) *Status {
	if !s.IsRejected() {
		return AsStatus(fmt.Errorf("running %q filter plugin: %w", plugin, s.Err())).WithPlugin(plugin)
	}
	return s.WithPlugin(plugin)
}

// HasBatchFilterPlugins reports whether a Filter plugin judges blocks of nodes per call.
func (ps *PluginSet) HasBatchFilterPlugins() bool {
	for _, e := range ps.filter {
		if _, ok := e.p.(BatchFilterPlugin); ok {
			return true
		}
	}
	return false
}

// RunFilterPluginsBatch sets out[i] to what RunFilterPlugins answers for nodes[i]: the
// plugins run in order and a node leaves at its first rejection, but a
// BatchFilterPlugin is called once with the nodes still in. A batch plugin's latency
// metric is then one observation per call, not per node.
func (ps *PluginSet) RunFilterPluginsBatch(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo, out []*Status) {
	clear(out)
	in := make([]int, len(nodes)) // indexes of the nodes every plugin so far passed
	for i := range in {
		in[i] = i
	}
	var sub []*NodeInfo
	var subOut []*Status
	for _, e := range ps.filter {
		if len(in) == 0 {
			return
		}
		if !e.applies(pod) || state.SkipFilterPlugins.Has(e.p.Name()) {
			continue
		}
		kept := in[:0]
		b, ok := e.p.(BatchFilterPlugin)
		if !ok {
			for _, i := range in {
				t := now(state)
				s := e.p.Filter(ctx, state, pod, nodes[i])
				ps.observe(state, e.p.Name(), PointFilter, s, t)
				if s.IsSuccess() {
					kept = append(kept, i)
				} else {
					out[i] = filterStatus(e.p.Name(), s)
				}
			}
			in = kept
			continue
		}
		sub, subOut = sub[:0], append(subOut[:0], make([]*Status, len(in))...)
		for _, i := range in {
			sub = append(sub, nodes[i])
		}
		t := now(state)
		b.FilterBatch(ctx, state, pod, sub, subOut)
		var first *Status
		for j, i := range in {
			if s := subOut[j]; s.IsSuccess() {
				kept = append(kept, i)
			} else {
				out[i] = filterStatus(e.p.Name(), s)
				first = cmp.Or(first, s)
			}
		}
		ps.observe(state, e.p.Name(), PointFilter, first, t)
		in = kept
	}
}

// RunPostFilterPlugins runs PostFilter plugins until one succeeds.
func (ps *PluginSet) RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, filtered NodeToStatus) (*PostFilterResult, *Status) {
	var reasons []string
	for _, e := range ps.postFilter {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		r, s := e.p.PostFilter(ctx, state, pod, filtered)
		ps.observe(state, e.p.Name(), PointPostFilter, s, t)
		if s.IsSuccess() {
			return r, s
		}
		if !s.IsRejected() {
			return r, s.WithPlugin(e.p.Name())
		}
		reasons = append(reasons, s.Reasons()...)
	}
	return nil, NewStatus(Unschedulable, reasons...)
}

// RunPreScorePlugins runs PreScore; Skip disables the plugin's Score for this pod.
func (ps *PluginSet) RunPreScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status {
	for _, e := range ps.preScore {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		s := e.p.PreScore(ctx, state, pod, nodes)
		ps.observe(state, e.p.Name(), PointPreScore, s, t)
		if s.IsSkip() {
			state.SkipScorePlugins.Insert(e.p.Name())
			continue
		}
		if !s.IsSuccess() {
			return AsStatus(fmt.Errorf("running PreScore plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
	}
	return nil
}

// PluginScore is one plugin's weighted score on a node.
type PluginScore struct {
	// Name is the plugin.
	Name string
	// Score is normalized × weight.
	Score int64
}

// NodePluginScores is a node's total and per-plugin scores.
type NodePluginScores struct {
	// Name is the node name.
	Name string
	// Scores are the per-plugin weighted scores.
	Scores []PluginScore
	// TotalScore sums Scores.
	TotalScore int64
}

// RunScorePlugins scores nodes with every plugin (in parallel over nodes), normalizes each
// plugin's scores, checks they are within [0, 100], applies weights and sums them.
func (ps *PluginSet) RunScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) (out []NodePluginScores, st *Status) {
	start := time.Now()
	defer func() {
		ps.fw.opts.Metrics.ObserveExtensionPoint(PointScore, st.Code().String(), ps.fw.name, time.Since(start))
	}()
	var plugins []entry[ScorePlugin]
	for _, e := range ps.score {
		if e.applies(pod) && !state.SkipScorePlugins.Has(e.p.Name()) {
			plugins = append(plugins, e)
		}
	}
	out = make([]NodePluginScores, len(nodes))
	for i, n := range nodes {
		out[i] = NodePluginScores{Name: n.Node().Name, Scores: make([]PluginScore, len(plugins))}
	}
	if len(plugins) == 0 {
		return out, nil
	}
	scores := make([]NodeScoreList, len(plugins))
	for i := range plugins {
		scores[i] = make(NodeScoreList, len(nodes))
	}
	// Batch plugins score every node in one call; the parallel walk calls the others.
	perNode := make([]bool, len(plugins))
	var raw []int64 // allocated only for a profile with a batch plugin
	for i, e := range plugins {
		b, ok := e.p.(BatchScorePlugin)
		if !ok {
			perNode[i] = true
			continue
		}
		if raw == nil {
			raw = make([]int64, len(nodes))
		}
		clear(raw)
		t := now(state)
		s := b.ScoreBatch(ctx, state, pod, nodes, raw)
		ps.observe(state, e.p.Name(), PointScore, s, t)
		if !s.IsSuccess() {
			return nil, AsStatus(fmt.Errorf("plugin %q failed with: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
		for n, ni := range nodes {
			scores[i][n] = NodeScore{Name: ni.Node().Name, Score: raw[n]}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errMu sync.Mutex
	var firstErr *Status
	walk := len(nodes)
	if !slices.Contains(perNode, true) {
		walk = 0 // nothing to call per node
	}
	ps.fw.parallel.Until(ctx, walk, func(n int) {
		ni := nodes[n]
		for i, e := range plugins {
			if !perNode[i] {
				continue
			}
			t := now(state)
			s, status := e.p.Score(ctx, state, pod, ni)
			ps.observe(state, e.p.Name(), PointScore, status, t)
			if !status.IsSuccess() {
				errMu.Lock()
				if firstErr == nil {
					firstErr = AsStatus(fmt.Errorf("plugin %q failed with: %w", e.p.Name(), status.Err())).WithPlugin(e.p.Name())
				}
				errMu.Unlock()
				cancel()
				return
			}
			scores[i][n] = NodeScore{Name: ni.Node().Name, Score: s}
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for i, e := range plugins {
		if ext := e.p.ScoreExtensions(); ext != nil {
			t := now(state)
			s := ext.NormalizeScore(ctx, state, pod, scores[i])
			ps.observe(state, e.p.Name(), PointNormalize, s, t)
			if !s.IsSuccess() {
				return nil, AsStatus(fmt.Errorf("plugin %q normalize failed: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
			}
		}
		for n := range nodes {
			sc := scores[i][n].Score
			if sc < MinNodeScore || sc > MaxNodeScore {
				return nil, AsStatus(fmt.Errorf("plugin %q returns an invalid score %d, it should in the range of [%d, %d] after normalizing", e.p.Name(), sc, MinNodeScore, MaxNodeScore)).WithPlugin(e.p.Name())
			}
			w := sc * e.weight
			out[n].Scores[i] = PluginScore{Name: e.p.Name(), Score: w}
			out[n].TotalScore += w
		}
	}
	return out, nil
}

// RunReservePluginsReserve runs Reserve; the caller must Unreserve on failure.
func (ps *PluginSet) RunReservePluginsReserve(ctx context.Context, state *CycleState, pod *v1.Pod, node string) *Status {
	for _, e := range ps.reserve {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		s := e.p.Reserve(ctx, state, pod, node)
		ps.observe(state, e.p.Name(), PointReserve, s, t)
		if !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(e.p.Name())
			}
			return AsStatus(fmt.Errorf("running Reserve plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
	}
	return nil
}

// RunReservePluginsUnreserve runs Unreserve in reverse order.
func (ps *PluginSet) RunReservePluginsUnreserve(ctx context.Context, state *CycleState, pod *v1.Pod, node string) {
	for i := len(ps.reserve) - 1; i >= 0; i-- {
		e := ps.reserve[i]
		if e.applies(pod) {
			e.p.Unreserve(ctx, state, pod, node)
		}
	}
}

// RunPermitPlugins runs Permit. If any plugin says Wait, the pod is parked (see
// WaitOnPermit) and Wait is returned.
func (ps *PluginSet) RunPermitPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, node string) *Status {
	timeouts := map[string]time.Duration{}
	for _, e := range ps.permit {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		s, d := e.p.Permit(ctx, state, pod, node)
		ps.observe(state, e.p.Name(), PointPermit, s, t)
		switch {
		case s.IsSuccess():
		case s.IsWait():
			if d > maxPermitTimeout || d <= 0 {
				d = maxPermitTimeout
			}
			timeouts[e.p.Name()] = d
		case s.IsRejected():
			return s.WithPlugin(e.p.Name())
		default:
			return AsStatus(fmt.Errorf("running Permit plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
	}
	if len(timeouts) == 0 {
		return nil
	}
	ps.fw.addWaitingPod(pod, timeouts)
	return NewStatus(Wait, "one or more plugins asked to wait")
}

// WaitOnPermit blocks until a parked pod is allowed, rejected, timed out, or ctx ends.
func (ps *PluginSet) WaitOnPermit(ctx context.Context, pod *v1.Pod) *Status {
	f := ps.fw
	f.waitingMu.Lock()
	wp := f.waiting[pod.UID]
	f.waitingMu.Unlock()
	if wp == nil {
		return nil
	}
	defer func() {
		f.waitingMu.Lock()
		delete(f.waiting, pod.UID)
		f.waitingMu.Unlock()
		wp.stopTimers()
	}()
	select {
	case s := <-wp.done:
		return s
	case <-ctx.Done():
		return AsStatus(fmt.Errorf("waiting on permit: %w", ctx.Err()))
	}
}

// RunPreBindPlugins runs PreBind.
func (ps *PluginSet) RunPreBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, node string) *Status {
	for _, e := range ps.preBind {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		s := e.p.PreBind(ctx, state, pod, node)
		ps.observe(state, e.p.Name(), PointPreBind, s, t)
		if s.IsSkip() {
			continue
		}
		if !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(e.p.Name())
			}
			return AsStatus(fmt.Errorf("running PreBind plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
	}
	return nil
}

// RunBindPlugins runs binders until one does not Skip.
func (ps *PluginSet) RunBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, node string) *Status {
	for _, e := range ps.bind {
		if !e.applies(pod) {
			continue
		}
		t := now(state)
		s := e.p.Bind(ctx, state, pod, node)
		ps.observe(state, e.p.Name(), PointBind, s, t)
		if s.IsSkip() {
			continue
		}
		if !s.IsSuccess() {
			return AsStatus(fmt.Errorf("running Bind plugin %q: %w", e.p.Name(), s.Err())).WithPlugin(e.p.Name())
		}
		return nil
	}
	return NewStatus(Skip, "no bind plugin bound the pod")
}

// RunPostBindPlugins runs PostBind.
func (ps *PluginSet) RunPostBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, node string) {
	for _, e := range ps.postBind {
		if e.applies(pod) {
			e.p.PostBind(ctx, state, pod, node)
		}
	}
}

// waitingPod is a pod parked by Permit.
type waitingPod struct {
	pod     *v1.Pod
	mu      sync.Mutex
	pending map[string]*time.Timer
	done    chan *Status
	sent    bool
}

func (f *Framework) addWaitingPod(pod *v1.Pod, timeouts map[string]time.Duration) {
	wp := &waitingPod{pod: pod, pending: map[string]*time.Timer{}, done: make(chan *Status, 1)}
	wp.mu.Lock()
	for name, d := range timeouts {
		wp.pending[name] = time.AfterFunc(d, func() {
			wp.Reject(name, "rejected due to timeout after waiting "+d.String()+" at plugin "+name)
		})
	}
	wp.mu.Unlock()
	f.waitingMu.Lock()
	f.waiting[pod.UID] = wp
	f.waitingMu.Unlock()
}

// GetWaitingPod implements Handle.
func (f *Framework) GetWaitingPod(uid types.UID) WaitingPod {
	f.waitingMu.Lock()
	defer f.waitingMu.Unlock()
	if wp, ok := f.waiting[uid]; ok {
		return wp
	}
	return nil
}

// IterateWaitingPods calls fn for every parked pod.
func (f *Framework) IterateWaitingPods(fn func(WaitingPod)) {
	f.waitingMu.Lock()
	list := make([]*waitingPod, 0, len(f.waiting))
	for _, wp := range f.waiting {
		list = append(list, wp)
	}
	f.waitingMu.Unlock()
	for _, wp := range list {
		fn(wp)
	}
}

// GetPod implements WaitingPod.
func (w *waitingPod) GetPod() *v1.Pod { return w.pod }

// GetPendingPlugins implements WaitingPod.
func (w *waitingPod) GetPendingPlugins() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending))
	for n := range w.pending {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Allow implements WaitingPod.
func (w *waitingPod) Allow(plugin string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.pending[plugin]; ok {
		t.Stop()
		delete(w.pending, plugin)
	}
	if len(w.pending) == 0 && !w.sent {
		w.sent = true
		w.done <- nil
	}
}

// Reject implements WaitingPod.
func (w *waitingPod) Reject(plugin, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.sent = true
		w.done <- NewStatus(Unschedulable, msg).WithPlugin(plugin)
	}
}

func (w *waitingPod) stopTimers() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.pending {
		t.Stop()
	}
}

// Plugin returns the plugin instance named name in this set, at whichever extension
// points it is configured (nil if absent).
func (ps *PluginSet) Plugin(name string) Plugin { return ps.byName[name] }
