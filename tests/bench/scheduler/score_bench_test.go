package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/defaultbinder"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/queuesort"
	"github.com/wasmplane/wasmplane/examples/scheduling/native"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/schedplugin"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// cpuTime is the CPU time this process has used. The benchmarks report it per op
// (cpu-ns/op) beside the wall time: on a shared machine the wall time measures the
// other processes' load as much as the code.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copies returns a function that makes copies of pod, each under a new name and UID: the
// scheduler meets a different pod every cycle, and a guest that caches the last pod it
// decoded must not look faster here than it is there.
func copies(pod *v1.Pod) func() *v1.Pod {
	n := 0
	return func() *v1.Pod {
		n++
		p := pod.DeepCopy()
		p.Name, p.UID = fmt.Sprintf("%s-%d", pod.Name, n), types.UID(fmt.Sprintf("%s-%d", pod.UID, n))
		return p
	}
}

// loop runs op as the benchmark loop and reports its CPU time per op.
func loop(b *testing.B, op func()) {
	c0 := cpuTime(b)
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime(b)-c0)/float64(b.N), "cpu-ns/op")
}

// benchProfile is a profile with a queue sort, a binder and ext.
func benchProfile(b *testing.B, ext framework.Extension) *framework.PluginSet {
	b.Helper()
	reg := framework.Registry{"PrioritySort": queuesort.New, "DefaultBinder": defaultbinder.New}
	plugins := &framework.Plugins{MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{{Name: "PrioritySort"}, {Name: "DefaultBinder"}}}}
	fw, err := framework.NewFramework(context.Background(), "bench", reg, plugins, nil, framework.Options{Parallelism: 16})
	if err != nil {
		b.Fatal(err)
	}
	if err := fw.SetExtension(ext); err != nil {
		b.Fatal(err)
	}
	return fw.Plugins()
}

// wasmProfile loads the example plugin built from pkg with as many instances as the
// scheduler gives it (GOMAXPROCS: the Filter walk calls them in parallel) and returns a
// profile holding its scheduler adapter, as a Filter or as a Score plugin. Callers warm
// up with warmups cycles so that every instance's node table holds the nodes.
func wasmProfile(b *testing.B, pkg, name, config string, filter bool) *framework.PluginSet {
	module := wasmtest.Go(b, pkg)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := wasm.NewRuntime(context.Background(), wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(b), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(context.Background()) })
	m, err := rt.Compile(context.Background(), module, wasm.Digest(module))
	if err != nil {
		b.Fatal(err)
	}
	p, err := rt.Load(context.Background(), m, wasm.PluginConfig{Name: name, Config: json.RawMessage(config),
		Limits: wasm.Limits{Instances: runtime.GOMAXPROCS(0), MaxInstances: runtime.GOMAXPROCS(0), Timeout: time.Minute}})
	_ = m.Close(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	a, err := schedplugin.New(schedplugin.Config{Name: "wasm:" + name, Plugin: p, Filter: filter, Score: !filter, Nodes: wasm.NewNodeCache(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return benchProfile(b, framework.Extension{Plugin: a})
}

// warmups is how many cycles fill every instance's node table (the pool hands out
// its instances in turn).
var warmups = 2 * runtime.GOMAXPROCS(0)

func benchNodeInfos(n int) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		node := benchNode(fmt.Sprintf("bench-node-%05d", i))
		node.UID = types.UID(strconv.Itoa(i))
		node.ResourceVersion = "1"
		node.Labels["example.com/priority"] = strconv.Itoa(i % 120)
		node.Labels["topology.kubernetes.io/zone"] = "zone-" + strconv.Itoa(i%3)
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		out[i] = ni
	}
	return out
}

// BenchmarkScore5000Nodes is the per-pod cost of one Score plugin over 5,000 feasible
// nodes through the framework (PreScore + Score on every node + weighting), label-score
// as a WASM module through the adapter against its native Go twin. The WASM figure is
// the steady state: node documents cached and already in the instance's node table.
func BenchmarkScore5000Nodes(b *testing.B) {
	nodes := benchNodeInfos(5000)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "p", UID: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
	next := copies(pod)
	const config = `{"label":"example.com/priority"}`
	one := func(b *testing.B, ps *framework.PluginSet) {
		ctx := context.Background()
		pod := next()
		state := framework.NewCycleState()
		if st := ps.RunPreScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
		if _, st := ps.RunScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
	}
	b.Run("native", func(b *testing.B) {
		ps := benchProfile(b, framework.Extension{Plugin: &native.LabelScore{PluginName: "LabelScore", Label: "example.com/priority"}})
		loop(b, func() { one(b, ps) })
	})
	b.Run("wasm", func(b *testing.B) {
		ps := wasmProfile(b, scorePkg, "label-score", config, false)
		for range warmups {
			one(b, ps)
		}
		loop(b, func() { one(b, ps) })
	})
}

// BenchmarkFilter5000Nodes is the per-pod cost of one Filter plugin over 5,000 nodes
// (PreFilter + Filter on every node): node-label-filter as a WASM module through the
// adapter against its native Go twin, steady state.
func BenchmarkFilter5000Nodes(b *testing.B) {
	nodes := benchNodeInfos(5000)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "p", UID: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}
	next := copies(pod)
	one := func(b *testing.B, ps *framework.PluginSet) {
		pod := next()
		ctx := context.Background()
		state := framework.NewCycleState()
		if _, st := ps.RunPreFilterPlugins(ctx, state, pod, nodes); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
		feasible, _, err := ps.FindFeasible(ctx, state, pod, nodes, 0, len(nodes))
		if err != nil || len(feasible) != len(nodes) {
			b.Fatalf("%d feasible nodes of %d: %v", len(feasible), len(nodes), err)
		}
	}
	cycle := func(b *testing.B, ps *framework.PluginSet) { loop(b, func() { one(b, ps) }) }
	b.Run("native", func(b *testing.B) {
		cycle(b, benchProfile(b, framework.Extension{Plugin: &native.NodeLabelFilter{PluginName: "NodeLabelFilter", Label: benchFilterLabel}}))
	})
	b.Run("wasm", func(b *testing.B) {
		ps := wasmProfile(b, filterPkg, "node-label-filter", `{"label":"`+benchFilterLabel+`"}`, true)
		for range warmups {
			one(b, ps)
		}
		cycle(b, ps)
	})
}

// BenchmarkScoreRotating500of5000 scores 500 feasible nodes of 5,000 per pod, the window
// moving by 500 each pod as the scheduler's rotating start index moves it: the node table
// keeps meeting nodes it does not hold (and resets past 2×500+1024 keys, ABI §7.6).
func BenchmarkScoreRotating500of5000(b *testing.B) {
	nodes := benchNodeInfos(5000)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "p", UID: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}
	next := copies(pod)
	ps := wasmProfile(b, scorePkg, "label-score", `{"label":"example.com/priority"}`, false)
	start := 0
	loop(b, func() {
		window := nodes[start : start+500]
		start = (start + 500) % len(nodes)
		pod, state := next(), framework.NewCycleState()
		if st := ps.RunPreScorePlugins(context.Background(), state, pod, window); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
		if _, st := ps.RunScorePlugins(context.Background(), state, pod, window); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
	})
}

// BenchmarkFilterWalk5000Nodes is Filter as the scheduler runs it for one pod over 5,000
// nodes: PreFilter, then the scheduler's parallel walk (PluginSet.FindFeasible) from a
// rotating start that stops once 500 feasible nodes are found (percentageOfNodesToScore's
// adaptive 10 %), node-label-filter as WASM against its native twin.
func BenchmarkFilterWalk5000Nodes(b *testing.B) {
	nodes := benchNodeInfos(5000)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "p", UID: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}
	next := copies(pod)
	const toFind = 500
	walk := func(b *testing.B, ps *framework.PluginSet, start int) int {
		pod := next()
		state := framework.NewCycleState()
		if _, st := ps.RunPreFilterPlugins(context.Background(), state, pod, nodes); !st.IsSuccess() {
			b.Fatal(st.Err())
		}
		feasible, rejected, err := ps.FindFeasible(context.Background(), state, pod, nodes, start, toFind)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range rejected {
			if st != nil {
				b.Fatalf("a node was rejected: %s", st.Message())
			}
		}
		return (start + len(feasible)) % len(nodes)
	}
	cycle := func(b *testing.B, ps *framework.PluginSet) {
		start := walk(b, ps, 0) // warm-up
		loop(b, func() { start = walk(b, ps, start) })
	}
	b.Run("native", func(b *testing.B) {
		cycle(b, benchProfile(b, framework.Extension{Plugin: &native.NodeLabelFilter{PluginName: "NodeLabelFilter", Label: benchFilterLabel}}))
	})
	b.Run("wasm", func(b *testing.B) {
		ps := wasmProfile(b, filterPkg, "node-label-filter", `{"label":"`+benchFilterLabel+`"}`, true)
		for s := 0; s < warmups*len(nodes); s += 500 { // fill the node tables over the whole cluster
			walk(b, ps, s%len(nodes))
		}
		cycle(b, ps)
	})
}
