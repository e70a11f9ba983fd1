package framework_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/defaultbinder"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/queuesort"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// fakeScore returns fixed raw scores per node, optionally normalizing them.
type fakeScore struct {
	name      string
	raw       map[string]int64
	normalize bool
}

func (f *fakeScore) Name() string { return f.name }
func (f *fakeScore) Score(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return f.raw[ni.Node().Name], nil
}
func (f *fakeScore) ScoreExtensions() framework.ScoreExtensions {
	if f.normalize {
		return f
	}
	return nil
}
func (f *fakeScore) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, s framework.NodeScoreList) *framework.Status {
	return framework.DefaultNormalizeScore(framework.MaxNodeScore, false, s)
}

// fakeFilter rejects the nodes it lists.
type fakeFilter struct {
	name   string
	reject sets.Set[string]
}

func (f *fakeFilter) Name() string { return f.name }
func (f *fakeFilter) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if f.reject.Has(ni.Node().Name) {
		return framework.NewStatus(framework.Unschedulable, "rejected by "+f.name)
	}
	return nil
}

// fakePermit waits.
type fakePermit struct{ d time.Duration }

func (f *fakePermit) Name() string { return "FakePermit" }
func (f *fakePermit) Permit(context.Context, *framework.CycleState, *v1.Pod, string) (*framework.Status, time.Duration) {
	return framework.NewStatus(framework.Wait), f.d
}

func registry(extra map[string]framework.Plugin) framework.Registry {
	r := framework.Registry{"PrioritySort": queuesort.New, "DefaultBinder": defaultbinder.New}
	for name, p := range extra {
		r[name] = func(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) { return p, nil }
	}
	return r
}

func newFW(t *testing.T, extra map[string]framework.Plugin, plugins *framework.Plugins) *framework.Framework {
	t.Helper()
	base := &framework.Plugins{MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{{Name: "PrioritySort"}, {Name: "DefaultBinder"}}}}
	fw, err := framework.NewFramework(context.Background(), "test", registry(extra), framework.MergePlugins(base, plugins), nil, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

func nodes(names ...string) []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for _, n := range names {
		out = append(out, st.NodeInfo(st.Node(n, st.Res("cpu", "1"))))
	}
	return out
}

func TestScoreNormalizeAndWeights(t *testing.T) {
	p1 := &fakeScore{name: "P1", raw: map[string]int64{"a": 10, "b": 20}, normalize: true}
	p2 := &fakeScore{name: "P2", raw: map[string]int64{"a": 100, "b": 0}}
	fw := newFW(t, map[string]framework.Plugin{"P1": p1, "P2": p2}, &framework.Plugins{Score: framework.PluginList{Enabled: []framework.PluginRef{{Name: "P1", Weight: 2}, {Name: "P2", Weight: 3}}}})
	out, s := fw.Plugins().RunScorePlugins(context.Background(), framework.NewCycleState(), st.Pod("p"), nodes("a", "b"))
	if !s.IsSuccess() {
		t.Fatal(s.Err())
	}
	// a: P1 10→50 ×2 = 100, P2 100 ×3 = 300 → 400; b: P1 20→100 ×2 = 200, P2 0 → 200.
	if out[0].TotalScore != 400 || out[1].TotalScore != 200 {
		t.Fatalf("totals %d %d, want 400 200", out[0].TotalScore, out[1].TotalScore)
	}
	if !reflect.DeepEqual(out[0].Scores, []framework.PluginScore{{Name: "P1", Score: 100}, {Name: "P2", Score: 300}}) {
		t.Fatalf("per-plugin %v", out[0].Scores)
	}
}

func TestScoreOutOfRangeIsError(t *testing.T) {
	p := &fakeScore{name: "Bad", raw: map[string]int64{"a": 101}}
	fw := newFW(t, map[string]framework.Plugin{"Bad": p}, &framework.Plugins{Score: framework.PluginList{Enabled: []framework.PluginRef{{Name: "Bad"}}}})
	if _, s := fw.Plugins().RunScorePlugins(context.Background(), framework.NewCycleState(), st.Pod("p"), nodes("a")); s.Code() != framework.Error {
		t.Fatalf("got %v, want Error", s.Code())
	}
}

func TestDefaultNormalizeScore(t *testing.T) {
	for _, tc := range []struct {
		reverse bool
		in      []int64
		want    []int64
	}{
		{false, []int64{1, 2, 3, 4}, []int64{25, 50, 75, 100}},
		{true, []int64{1, 2, 3, 4}, []int64{75, 50, 25, 0}},
		{false, []int64{0, 0}, []int64{0, 0}},
		{true, []int64{0, 0}, []int64{100, 100}},
	} {
		l := framework.NodeScoreList{}
		for _, v := range tc.in {
			l = append(l, framework.NodeScore{Score: v})
		}
		framework.DefaultNormalizeScore(100, tc.reverse, l)
		for i := range l {
			if l[i].Score != tc.want[i] {
				t.Fatalf("reverse=%v %v → %v, want %v", tc.reverse, tc.in, l, tc.want)
			}
		}
	}
}

func TestFitErrorMessage(t *testing.T) {
	cpu := framework.NewStatus(framework.Unschedulable, "Insufficient cpu")
	taint := framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {k: v}")
	both := framework.NewStatus(framework.Unschedulable, "Insufficient cpu", "Insufficient memory")
	e := &framework.FitError{NumAllNodes: 5, Diagnosis: framework.Diagnosis{
		NodeToStatus:  framework.NodeToStatus{"n1": cpu, "n2": cpu, "n3": both, "n4": taint, "n5": taint},
		PostFilterMsg: "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
	}}
	want := "0/5 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated taint {k: v}, 3 Insufficient cpu. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
	if e.Error() != want {
		t.Fatalf("got  %q\nwant %q", e.Error(), want)
	}
	pre := &framework.FitError{NumAllNodes: 3, Diagnosis: framework.Diagnosis{PreFilterMsg: "node(s) didn't satisfy plugin X"}}
	if got := pre.Error(); got != "0/3 nodes are available: node(s) didn't satisfy plugin X." {
		t.Fatalf("got %q", got)
	}
}

func TestExtensionSwapIsAtomicPerCycle(t *testing.T) {
	fw := newFW(t, nil, nil)
	before := fw.Plugins()
	if before.HasFilterPlugins() {
		t.Fatal("unexpected filter")
	}
	v1f := &fakeFilter{name: "Wasm", reject: sets.New("a")}
	if err := fw.SetExtension(framework.Extension{Plugin: v1f}); err != nil {
		t.Fatal(err)
	}
	withV1 := fw.Plugins()
	if before.HasFilterPlugins() {
		t.Fatal("a set taken before the swap changed")
	}
	pod := st.Pod("p")
	if s := withV1.RunFilterPlugins(context.Background(), framework.NewCycleState(), pod, nodes("a")[0]); s.IsSuccess() || s.Plugin() != "Wasm" {
		t.Fatal("extension filter not run")
	}
	// Replace by name: the old set keeps the old plugin, the new set has the new one.
	v2f := &fakeFilter{name: "Wasm", reject: sets.New("b")}
	if err := fw.SetExtension(framework.Extension{Plugin: v2f}); err != nil {
		t.Fatal(err)
	}
	withV2 := fw.Plugins()
	a := nodes("a")[0]
	if withV1.RunFilterPlugins(context.Background(), framework.NewCycleState(), pod, a).IsSuccess() {
		t.Fatal("in-flight set changed by the swap")
	}
	if !withV2.RunFilterPlugins(context.Background(), framework.NewCycleState(), pod, a).IsSuccess() {
		t.Fatal("new set still runs the old plugin")
	}
	if got := fw.ExtensionNames(); !reflect.DeepEqual(got, []string{"Wasm"}) {
		t.Fatalf("extensions %v", got)
	}
	if !fw.RemoveExtension("Wasm") || fw.Plugins().HasFilterPlugins() {
		t.Fatal("remove failed")
	}
	if err := fw.SetExtension(framework.Extension{Plugin: &fakeFilter{name: "PrioritySort"}}); err == nil {
		t.Fatal("an extension may not shadow a configured plugin")
	}
}

func TestNamespacedExtension(t *testing.T) {
	fw := newFW(t, nil, nil)
	if err := fw.SetExtension(framework.Extension{Plugin: &fakeFilter{name: "Tenant", reject: sets.New("a")}, Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	mine, other := st.Pod("mine"), st.Pod("other")
	mine.Namespace, other.Namespace = "team-a", "team-b"
	ps, a := fw.Plugins(), nodes("a")[0]
	if ps.RunFilterPlugins(context.Background(), framework.NewCycleState(), mine, a).IsSuccess() {
		t.Fatal("tenant plugin not applied to its namespace")
	}
	if !ps.RunFilterPlugins(context.Background(), framework.NewCycleState(), other, a).IsSuccess() {
		t.Fatal("tenant plugin applied to another namespace")
	}
}

func TestPermitWaitAllowRejectTimeout(t *testing.T) {
	perm := &fakePermit{d: time.Minute}
	fw := newFW(t, map[string]framework.Plugin{"FakePermit": perm}, &framework.Plugins{Permit: framework.PluginList{Enabled: []framework.PluginRef{{Name: "FakePermit"}}}})
	ps := fw.Plugins()
	ctx := context.Background()

	allow := st.Pod("allow")
	if s := ps.RunPermitPlugins(ctx, framework.NewCycleState(), allow, "n"); !s.IsWait() {
		t.Fatalf("got %v, want Wait", s.Code())
	}
	go fw.GetWaitingPod(allow.UID).Allow("FakePermit")
	if s := ps.WaitOnPermit(ctx, allow); !s.IsSuccess() {
		t.Fatalf("allowed pod: %v", s.Code())
	}

	reject := st.Pod("reject")
	ps.RunPermitPlugins(ctx, framework.NewCycleState(), reject, "n")
	go fw.GetWaitingPod(reject.UID).Reject("FakePermit", "no")
	if s := ps.WaitOnPermit(ctx, reject); s.Code() != framework.Unschedulable {
		t.Fatalf("rejected pod: %v", s.Code())
	}

	perm.d = 50 * time.Millisecond
	slow := st.Pod("slow")
	ps.RunPermitPlugins(ctx, framework.NewCycleState(), slow, "n")
	if s := ps.WaitOnPermit(ctx, slow); s.Code() != framework.Unschedulable {
		t.Fatalf("timed-out pod: %v", s.Code())
	}
	if fw.GetWaitingPod(slow.UID) != nil {
		t.Fatal("waiting pod not cleaned up")
	}
}

func TestMergePlugins(t *testing.T) {
	def := &framework.Plugins{MultiPoint: framework.PluginList{Enabled: []framework.PluginRef{{Name: "A"}, {Name: "B", Weight: 2}, {Name: "C"}}}}
	got := framework.MergePlugins(def, &framework.Plugins{MultiPoint: framework.PluginList{
		Enabled:  []framework.PluginRef{{Name: "D"}, {Name: "B", Weight: 5}},
		Disabled: []framework.PluginRef{{Name: "C"}},
	}})
	want := []framework.PluginRef{{Name: "A"}, {Name: "B", Weight: 5}, {Name: "D"}}
	if !reflect.DeepEqual(got.MultiPoint.Enabled, want) {
		t.Fatalf("got %v, want %v", got.MultiPoint.Enabled, want)
	}
	all := framework.MergePlugins(def, &framework.Plugins{MultiPoint: framework.PluginList{Disabled: []framework.PluginRef{{Name: "*"}}, Enabled: []framework.PluginRef{{Name: "X"}}}})
	if !reflect.DeepEqual(all.MultiPoint.Enabled, []framework.PluginRef{{Name: "X"}}) {
		t.Fatalf("got %v", all.MultiPoint.Enabled)
	}
}

func TestParallelizer(t *testing.T) {
	var hits [1000]int32
	framework.NewParallelizer(4).Until(context.Background(), len(hits), func(i int) { hits[i]++ })
	for i, h := range hits {
		if h != 1 {
			t.Fatalf("piece %d ran %d times", i, h)
		}
	}
}

// TestPluginLookupEveryPoint: PluginSet.Plugin finds a plugin whichever extension points
// it is configured at, and finds extensions too.
func TestPluginLookupEveryPoint(t *testing.T) {
	perm := &fakePermit{d: time.Minute}
	score := &fakeScore{name: "FakeScore"}
	fw := newFW(t, map[string]framework.Plugin{"FakePermit": perm, "FakeScore": score}, &framework.Plugins{
		Permit: framework.PluginList{Enabled: []framework.PluginRef{{Name: "FakePermit"}}},
		Score:  framework.PluginList{Enabled: []framework.PluginRef{{Name: "FakeScore", Weight: 1}}},
	})
	ext := &fakeFilter{name: "Tenant"}
	if err := fw.SetExtension(framework.Extension{Plugin: ext, Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	ps := fw.Plugins()
	for _, tc := range []struct {
		name string
		want framework.Plugin
	}{
		{"FakePermit", perm}, // permit only: the old lookup missed it
		{"FakeScore", score},
		{"Tenant", ext},
		{"PrioritySort", nil}, // checked by name below: the instance is made by its factory
		{"Missing", nil},
	} {
		got := ps.Plugin(tc.name)
		switch tc.name {
		case "PrioritySort":
			if got == nil || got.Name() != "PrioritySort" {
				t.Errorf("Plugin(%q) = %v, want the queue sort plugin", tc.name, got)
			}
		default:
			if got != tc.want {
				t.Errorf("Plugin(%q) = %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

// onlyReserve, onlyPreBind and onlyPostBind implement one extension point each: points a
// lookup by name once missed.
type onlyReserve struct{}

func (onlyReserve) Name() string { return "OnlyReserve" }
func (onlyReserve) Reserve(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}
func (onlyReserve) Unreserve(context.Context, *framework.CycleState, *v1.Pod, string) {}

type onlyPreBind struct{}

func (onlyPreBind) Name() string { return "OnlyPreBind" }
func (onlyPreBind) PreBind(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

type onlyPostBind struct{ name string }

func (p onlyPostBind) Name() string                                                   { return p.name }
func (onlyPostBind) PostBind(context.Context, *framework.CycleState, *v1.Pod, string) {}

// TestPluginByName finds a configured plugin or extension whichever points it
// implements, QueueSort, Permit and the binding points included.
func TestPluginByName(t *testing.T) {
	extra := map[string]framework.Plugin{"FakePermit": &fakePermit{}, "OnlyReserve": onlyReserve{}, "OnlyPreBind": onlyPreBind{},
		"OnlyPostBind": onlyPostBind{name: "OnlyPostBind"}, "F": &fakeFilter{name: "F"}}
	fw := newFW(t, extra, &framework.Plugins{
		Filter:   framework.PluginList{Enabled: []framework.PluginRef{{Name: "F"}}},
		Reserve:  framework.PluginList{Enabled: []framework.PluginRef{{Name: "OnlyReserve"}}},
		Permit:   framework.PluginList{Enabled: []framework.PluginRef{{Name: "FakePermit"}}},
		PreBind:  framework.PluginList{Enabled: []framework.PluginRef{{Name: "OnlyPreBind"}}},
		PostBind: framework.PluginList{Enabled: []framework.PluginRef{{Name: "OnlyPostBind"}}},
	})
	if err := fw.SetExtension(framework.Extension{Plugin: onlyPostBind{name: "wasm:post"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		found bool
	}{
		{"PrioritySort", true}, {"DefaultBinder", true}, {"F", true}, {"OnlyReserve", true}, {"FakePermit", true},
		{"OnlyPreBind", true}, {"OnlyPostBind", true}, {"wasm:post", true}, {"Missing", false},
	} {
		p := fw.Plugins().Plugin(tc.name)
		if (p != nil) != tc.found || (p != nil && p.Name() != tc.name) {
			t.Errorf("Plugin(%q) = %v, want found=%v", tc.name, p, tc.found)
		}
	}
}
