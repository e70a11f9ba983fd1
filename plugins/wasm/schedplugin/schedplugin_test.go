package schedplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
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

const (
	filterPkg   = "examples/plugins/go/node-label-filter"
	scorePkg    = "examples/plugins/go/label-score"
	strategyPkg = "examples/scheduling/strategy-score"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newRuntime(t testing.TB) *wasm.Runtime {
	t.Helper()
	r, err := wasm.NewRuntime(context.Background(), wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func load(t testing.TB, r *wasm.Runtime, module []byte, name, config string, limits wasm.Limits) *wasm.Plugin {
	t.Helper()
	ctx := context.Background()
	m, err := r.Compile(ctx, module, wasm.Digest(module))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	p, err := r.Load(ctx, m, wasm.PluginConfig{Name: name, Config: json.RawMessage(config), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func adapter(t testing.TB, cfg schedplugin.Config) framework.Plugin {
	t.Helper()
	if cfg.Nodes == nil {
		cfg.Nodes = wasm.NewNodeCache()
	}
	cfg.Logger = quiet
	p, err := schedplugin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newFramework is a profile with only a queue sort and a binder, plus exts.
func newFramework(t testing.TB, exts ...framework.Extension) *framework.Framework {
	t.Helper()
	reg := framework.Registry{"PrioritySort": queuesort.New, "DefaultBinder": defaultbinder.New}
	plugins := &framework.Plugins{MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{{Name: "PrioritySort"}, {Name: "DefaultBinder"}}}}
	fw, err := framework.NewFramework(context.Background(), "test", reg, plugins, nil, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exts {
		if err := fw.SetExtension(e); err != nil {
			t.Fatal(err)
		}
	}
	return fw
}

// cluster builds n nodes with varied labels and CPU use.
func cluster(n int) []*framework.NodeInfo {
	disks := []string{"ssd", "hdd", "nvme", ""}
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		labels := map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%04d", i)}
		if d := disks[i%len(disks)]; d != "" {
			labels["disk"] = d
		}
		switch i % 7 {
		case 0:
			labels["example.com/priority"] = "x" + strconv.Itoa(i) // not a number: 0
		case 1:
			// missing: 0
		default:
			labels["example.com/priority"] = strconv.Itoa(i % 130) // > 100 clamps
		}
		alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse(strconv.Itoa(2+i%6) + "500m"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: "1", Labels: labels},
			Status: v1.NodeStatus{Capacity: alloc, Allocatable: alloc}}
		var pods []*v1.Pod
		for j := 0; j < i%5; j++ {
			pods = append(pods, pod(fmt.Sprintf("on-%d-%d", i, j), strconv.Itoa(150*(1+i%4))+"m"))
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(node)
		out[i] = ni
	}
	return out
}

func pod(name, cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "app", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
}

// outcome is what one profile decides for a pod: the reason per rejected node and the
// total score per feasible node.
type outcome struct {
	rejected map[string]string
	scores   map[string]int64
}

// run drives a framework through one cycle's PreFilter, Filter, PreScore and Score as
// the scheduler does (the batched walk over every node, PluginSet.FindFeasible, then
// RunScorePlugins, which scores batch plugins in one call).
func run(t testing.TB, fw *framework.Framework, p *v1.Pod, nodes []*framework.NodeInfo) (outcome, *framework.Status) {
	return runWith(t, fw, p, nodes, false)
}

// runWith is run, or with perNode a cycle through the per-node entry points (Filter and
// Score called node by node, as a nominated node or preemption's dry runs call Filter).
func runWith(t testing.TB, fw *framework.Framework, p *v1.Pod, nodes []*framework.NodeInfo, perNode bool) (outcome, *framework.Status) {
	t.Helper()
	ctx := context.Background()
	ps := fw.Plugins()
	state := framework.NewCycleState()
	out := outcome{rejected: map[string]string{}, scores: map[string]int64{}}
	if _, st := ps.RunPreFilterPlugins(ctx, state, p, nodes); !st.IsSuccess() {
		return out, st
	}
	var feasible []*framework.NodeInfo
	if perNode {
		for _, ni := range nodes {
			st := ps.RunFilterPlugins(ctx, state, p, ni)
			switch {
			case st.IsSuccess():
				feasible = append(feasible, ni)
			case st.IsRejected():
				out.rejected[ni.Node().Name] = st.Message()
			default:
				return out, st
			}
		}
	} else {
		var rejected []*framework.Status
		var err error
		if feasible, rejected, err = ps.FindFeasible(ctx, state, p, nodes, 0, len(nodes)); err != nil {
			return out, framework.AsStatus(err)
		}
		for i, st := range rejected {
			if st != nil {
				out.rejected[nodes[i].Node().Name] = st.Message()
			}
		}
	}
	if st := ps.RunPreScorePlugins(ctx, state, p, feasible); !st.IsSuccess() {
		return out, st
	}
	if perNode {
		return scorePerNode(ctx, t, ps, state, p, feasible, out)
	}
	scores, st := ps.RunScorePlugins(ctx, state, p, feasible)
	if !st.IsSuccess() {
		return out, st
	}
	for _, s := range scores {
		out.scores[s.Name] = s.TotalScore
	}
	return out, nil
}

// scorePerNode sums weight × Score of each Score plugin of the profile, node by node.
func scorePerNode(ctx context.Context, t testing.TB, ps *framework.PluginSet, state *framework.CycleState, p *v1.Pod, feasible []*framework.NodeInfo, out outcome) (outcome, *framework.Status) {
	weights := map[string]int64{}
	for _, e := range ps.PluginNames()[framework.PointScore] {
		i := strings.LastIndex(e, ":") // "wasm:name:weight"
		name, w := e[:i], e[i+1:]
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			t.Fatalf("score entry %q: %v", e, err)
		}
		weights[name] = n
	}
	for _, ni := range feasible {
		out.scores[ni.Node().Name] = 0
		for name, w := range weights {
			sp, ok := ps.Plugin(name).(framework.ScorePlugin)
			if !ok || state.SkipScorePlugins.Has(name) {
				continue
			}
			if sp.ScoreExtensions() != nil {
				t.Fatalf("%s normalizes its scores: scorePerNode does not", name)
			}
			s, st := sp.Score(ctx, state, p, ni)
			if !st.IsSuccess() {
				return out, st
			}
			out.scores[ni.Node().Name] += s * w
		}
	}
	return out, nil
}

func diff(t *testing.T, what string, wasmOut, nativeOut outcome) {
	t.Helper()
	if len(wasmOut.rejected) != len(nativeOut.rejected) || len(wasmOut.scores) != len(nativeOut.scores) {
		t.Fatalf("%s: wasm rejects %d and scores %d nodes, native rejects %d and scores %d", what,
			len(wasmOut.rejected), len(wasmOut.scores), len(nativeOut.rejected), len(nativeOut.scores))
	}
	for n, r := range nativeOut.rejected {
		if wasmOut.rejected[n] != r {
			t.Errorf("%s: node %s: wasm reason %q, native %q", what, n, wasmOut.rejected[n], r)
		}
	}
	for n, s := range nativeOut.scores {
		if got, ok := wasmOut.scores[n]; !ok || got != s {
			t.Errorf("%s: node %s: wasm score %d (scored %v), native %d", what, n, got, ok, s)
		}
	}
}

// TestSameAsNativeTwins: the example WASM plugins and their native twins reject the same
// nodes with the same reasons and give the same weighted scores.
func TestSameAsNativeTwins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	mods := wasmtest.GoAll(t, filterPkg, scorePkg, strategyPkg)
	r := newRuntime(t)
	nodes := cluster(300)
	p := pod("web", "200m")
	// The twins are compared for their answers, not their speed: a score over 300 nodes
	// on a loaded machine may take longer than the default 1 s deadline.
	twin := wasm.Limits{Timeout: 30 * time.Second}
	cases := []struct {
		name       string
		wasm       []framework.Extension
		nativeExts []framework.Extension
	}{
		{
			name: "filter+score",
			wasm: []framework.Extension{
				{Plugin: adapter(t, schedplugin.Config{Name: "wasm:disk", Filter: true, Plugin: load(t, r, mods[filterPkg], "disk", `{"label":"disk","values":["ssd","nvme"]}`, twin)})},
				{Plugin: adapter(t, schedplugin.Config{Name: "wasm:prio", Score: true, Plugin: load(t, r, mods[scorePkg], "prio", `{"label":"example.com/priority"}`, twin)}), Weight: 3},
			},
			nativeExts: []framework.Extension{
				{Plugin: &native.NodeLabelFilter{PluginName: "disk", Label: "disk", Values: []string{"ssd", "nvme"}}},
				{Plugin: &native.LabelScore{PluginName: "prio", Label: "example.com/priority"}, Weight: 3},
			},
		},
		{
			name: "filter-label-only",
			wasm: []framework.Extension{
				{Plugin: adapter(t, schedplugin.Config{Name: "wasm:disk", Filter: true, Plugin: load(t, r, mods[filterPkg], "disk-any", `{"label":"disk"}`, twin)})},
			},
			nativeExts: []framework.Extension{{Plugin: &native.NodeLabelFilter{PluginName: "disk", Label: "disk"}}},
		},
		{
			name: "strategy-spread-uses-requested",
			wasm: []framework.Extension{
				{Plugin: adapter(t, schedplugin.Config{Name: "wasm:strategy", Score: true, Plugin: load(t, r, mods[strategyPkg], "spread", `{"strategy":"spread"}`, twin)})},
			},
			nativeExts: []framework.Extension{{Plugin: &native.Strategy{PluginName: "strategy", Mode: "spread"}}},
		},
		{
			name: "strategy-binpack",
			wasm: []framework.Extension{
				{Plugin: adapter(t, schedplugin.Config{Name: "wasm:strategy", Score: true, Plugin: load(t, r, mods[strategyPkg], "binpack", `{"strategy":"binpack"}`, twin)})},
			},
			nativeExts: []framework.Extension{{Plugin: &native.Strategy{PluginName: "strategy", Mode: "binpack"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wasmOut, st := run(t, newFramework(t, tc.wasm...), p, nodes)
			if !st.IsSuccess() {
				t.Fatalf("wasm profile: %v", st.Err())
			}
			nativeOut, st := run(t, newFramework(t, tc.nativeExts...), p, nodes)
			if !st.IsSuccess() {
				t.Fatalf("native profile: %v", st.Err())
			}
			if len(nativeOut.scores) == 0 {
				t.Fatal("no node is feasible: the case proves nothing")
			}
			diff(t, tc.name, wasmOut, nativeOut)
			// Node by node (a nominated node, preemption's dry runs): the same answers.
			perNode, st := runWith(t, newFramework(t, tc.wasm...), p, nodes, true)
			if !st.IsSuccess() {
				t.Fatalf("wasm profile, node by node: %v", st.Err())
			}
			diff(t, tc.name+" node by node", perNode, nativeOut)
			// The scores must vary, or equal totals would prove nothing.
			distinct := map[int64]bool{}
			for _, s := range wasmOut.scores {
				distinct[s] = true
			}
			if len(distinct) < 2 && strings.Contains(tc.name, "score") {
				t.Errorf("all feasible nodes scored the same")
			}
		})
	}
	// The guest's reason reaches the FailedScheduling message ("0/N nodes are available").
	wasmOut, _ := run(t, newFramework(t, cases[0].wasm...), p, nodes)
	diag := framework.Diagnosis{NodeToStatus: framework.NodeToStatus{}}
	for n, r := range wasmOut.rejected {
		diag.NodeToStatus[n] = framework.NewStatus(framework.Unschedulable, r)
	}
	msg := (&framework.FitError{Pod: p, NumAllNodes: len(nodes), Diagnosis: diag}).Error()
	if !strings.Contains(msg, `node lacks label "disk"`) || !strings.Contains(msg, "node label disk=hdd is not one of [ssd nvme]") {
		t.Errorf("FailedScheduling message lacks the guest's reasons: %s", msg)
	}
}

// faulty is a module whose filter and score hooks misbehave as told (WAT bodies).
func faulty(t testing.TB, filterBody, scoreBody string) []byte {
	t.Helper()
	return module(t, "not json at all", filterBody, scoreBody)
}

// module is a hand-written guest with data at offset 64 and the given hook bodies.
func module(t testing.TB, data, filterBody, scoreBody string) []byte {
	t.Helper()
	src := `(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))
  (func (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (data (i32.const 64) "` + strings.ReplaceAll(data, `"`, `\"`) + `")
  (func (export "filter") (param i32 i32) (result i64) ` + filterBody + `)
  (func (export "score") (param i32 i32) (result i64) ` + scoreBody + `)
)`
	return wasmtest.WATSource(t, src)
}

const (
	trapBody    = `(unreachable)`
	loopBody    = `(loop $forever (br $forever)) (unreachable)`
	garbageBody = `(i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 15))`
)

// TestFailurePolicy: a trap, a runaway guest or garbage fails the attempt with Error
// under Fail, and under Ignore the plugin passes every node (Filter) or adds nothing
// (Score); a looping guest is cut off at limits.timeout.
func TestFailurePolicy(t *testing.T) {
	r := newRuntime(t)
	nodes := cluster(20)
	p := pod("web", "100m")
	const timeout = 200 * time.Millisecond
	cases := []struct {
		name, body string
		kind       wasm.Kind
	}{
		{"trap", trapBody, wasm.ErrTrap},
		{"loop", loopBody, wasm.ErrTimeout},
		{"garbage", garbageBody, wasm.ErrBadOutput},
	}
	for _, tc := range cases {
		for _, hook := range []string{"filter", "score"} {
			for _, mode := range []struct{ ignore, perNode bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				ignore, perNode := mode.ignore, mode.perNode
				t.Run(fmt.Sprintf("%s/%s/ignore=%v/perNode=%v", tc.name, hook, ignore, perNode), func(t *testing.T) {
					good := `(unreachable)` // never called: the other hook is not enabled
					fb, sb := good, good
					if hook == "filter" {
						fb = tc.body
					} else {
						sb = tc.body
					}
					mod := load(t, r, faulty(t, fb, sb), "faulty", "", wasm.Limits{Timeout: timeout, Instances: 1})
					a := adapter(t, schedplugin.Config{Name: "wasm:faulty", Filter: hook == "filter", Score: hook == "score", Ignore: ignore, Plugin: mod})
					fw := newFramework(t, framework.Extension{Plugin: a})
					// The attempt must end: a looping guest is cut off at its timeout, so
					// the attempt gets a deadline far beyond it (a bound, not a timing).
					type result struct {
						out outcome
						st  *framework.Status
					}
					done := make(chan result, 1)
					go func() {
						out, st := runWith(t, fw, p, nodes, perNode)
						done <- result{out, st}
					}()
					var out outcome
					var st *framework.Status
					select {
					case r := <-done:
						out, st = r.out, r.st
					case <-time.After(timeout + 30*time.Second):
						t.Fatalf("the attempt did not end within 30 s of the guest's %v timeout", timeout)
					}
					if !ignore {
						if st.Code() != framework.Error {
							t.Fatalf("status %v (%v), want Error", st.Code(), st.Message())
						}
						if !strings.Contains(st.Message(), string(tc.kind)) || !strings.Contains(st.Message(), "wasm:faulty") {
							t.Errorf("error %q does not name the plugin and the kind %q", st.Message(), tc.kind)
						}
						return
					}
					if !st.IsSuccess() {
						t.Fatalf("failurePolicy Ignore: status %v: %v", st.Code(), st.Message())
					}
					if len(out.rejected) != 0 || len(out.scores) != len(nodes) {
						t.Fatalf("Ignore: %d rejected, %d scored of %d", len(out.rejected), len(out.scores), len(nodes))
					}
					for n, s := range out.scores {
						if s != 0 {
							t.Fatalf("Ignore: node %s scored %d, want 0", n, s)
						}
					}
				})
			}
		}
	}
}

// TestClampsScores: scores outside [0, 100] are clamped, so the framework's range check
// never fails the attempt.
func TestClampsScores(t *testing.T) {
	r := newRuntime(t)
	answer := `{"scores":[-5,250,42]}`
	body := fmt.Sprintf(`(i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const %d))`, len(answer))
	mod := load(t, r, module(t, answer, `(unreachable)`, body), "clamp", "", wasm.Limits{})
	a := adapter(t, schedplugin.Config{Name: "wasm:clamp", Score: true, Plugin: mod})
	out, st := run(t, newFramework(t, framework.Extension{Plugin: a}), pod("p", "100m"), cluster(3))
	if !st.IsSuccess() {
		t.Fatal(st.Err())
	}
	want := map[string]int64{"node-0000": 0, "node-0001": 100, "node-0002": 42}
	for n, w := range want {
		if out.scores[n] != w {
			t.Errorf("%s: %d, want %d", n, out.scores[n], w)
		}
	}
}
