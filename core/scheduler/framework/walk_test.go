package framework_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// batchFilter is fakeFilter judging blocks: it records the nodes of each call and fails
// every call once fail is set.
type batchFilter struct {
	fakeFilter
	mu    sync.Mutex
	calls [][]string
	fail  error
}

func (f *batchFilter) FilterBatch(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, out []*framework.Status) {
	var names []string
	for i, ni := range nodes {
		names = append(names, ni.Node().Name)
		if f.fail != nil {
			out[i] = framework.AsStatus(f.fail)
			continue
		}
		out[i] = f.Filter(ctx, state, pod, ni)
	}
	f.mu.Lock()
	f.calls = append(f.calls, names)
	f.mu.Unlock()
}

// batchScore is fakeScore scoring every node in one call; Score per node fails, so a
// framework that calls it per node is caught.
type batchScore struct {
	fakeScore
	calls int
}

func (f *batchScore) Score(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) (int64, *framework.Status) {
	return 0, framework.AsStatus(errors.New("Score called per node on a batch plugin"))
}

func (f *batchScore) ScoreBatch(_ context.Context, _ *framework.CycleState, _ *v1.Pod, nodes []*framework.NodeInfo, out []int64) *framework.Status {
	f.calls++
	for i, ni := range nodes {
		s, ok := f.raw[ni.Node().Name]
		if !ok {
			return framework.AsStatus(fmt.Errorf("no score for %s", ni.Node().Name))
		}
		out[i] = s
	}
	return nil
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%03d", i)
	}
	return out
}

// TestRunFilterPluginsBatch: a block gets, node by node, what RunFilterPlugins answers
// (the first rejecting plugin in order), and a batch plugin is asked once, about the
// nodes the plugins before it passed.
func TestRunFilterPluginsBatch(t *testing.T) {
	first := &fakeFilter{name: "First", reject: sets.New("n001", "n004")}
	batch := &batchFilter{fakeFilter: fakeFilter{name: "Batch", reject: sets.New("n002", "n004")}}
	last := &fakeFilter{name: "Last", reject: sets.New("n003")}
	fw := newFW(t, map[string]framework.Plugin{"First": first, "Batch": batch, "Last": last},
		&framework.Plugins{Filter: framework.PluginList{Enabled: []framework.PluginRef{{Name: "First"}, {Name: "Batch"}, {Name: "Last"}}}})
	ps := fw.Plugins()
	if !ps.HasBatchFilterPlugins() {
		t.Fatal("HasBatchFilterPlugins = false with a batch plugin in the profile")
	}
	block := nodes(names(6)...)
	out := make([]*framework.Status, len(block))
	out[0] = framework.NewStatus(framework.Unschedulable, "stale") // cleared by the call
	ctx, state, pod := context.Background(), framework.NewCycleState(), st.Pod("p")
	ps.RunFilterPluginsBatch(ctx, state, pod, block, out)
	for i, ni := range block {
		want := ps.RunFilterPlugins(ctx, state, pod, ni)
		if out[i].Code() != want.Code() || out[i].Plugin() != want.Plugin() || out[i].Message() != want.Message() {
			t.Errorf("%s: batch %v %q by %q, per node %v %q by %q", ni.Node().Name,
				out[i].Code(), out[i].Message(), out[i].Plugin(), want.Code(), want.Message(), want.Plugin())
		}
	}
	if got, want := batch.calls[0], []string{"n000", "n002", "n003", "n005"}; !slices.Equal(got, want) {
		t.Errorf("the batch plugin was asked about %v, want %v (what First passed)", got, want)
	}
	if len(batch.calls) != 1 { // RunFilterPlugins calls Filter, not FilterBatch
		t.Errorf("%d batch calls", len(batch.calls))
	}
}

// TestFindFeasible: the walk starts at start, wraps, stops at toFind feasible nodes,
// reports each rejected node by walk position, calls a batch plugin per block of nodes
// in walk order, and ends with a plugin's error.
func TestFindFeasible(t *testing.T) {
	all := nodes(names(300)...)
	cases := []struct {
		name                string
		batch               bool
		start, toFind       int
		reject              sets.Set[string]
		fail                error
		wantFeasible        int
		wantRejectedAtLeast int
		wantErr             bool
	}{
		// n010 is in a block a worker may leave undone once the others found enough.
		{name: "per node, stops at toFind", start: 250, toFind: 100, reject: sets.New("n251", "n010"), wantFeasible: 100, wantRejectedAtLeast: 1},
		{name: "per node, all", toFind: 300, reject: sets.New("n000"), wantFeasible: 299, wantRejectedAtLeast: 1},
		{name: "batch, stops at toFind", batch: true, start: 250, toFind: 100, reject: sets.New("n251", "n010"), wantFeasible: 100, wantRejectedAtLeast: 1},
		{name: "batch, all", batch: true, toFind: 300, reject: sets.New("n000", "n299"), wantFeasible: 298, wantRejectedAtLeast: 2},
		{name: "batch, error", batch: true, toFind: 100, fail: errors.New("guest trapped"), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p framework.Plugin = &fakeFilter{name: "F", reject: tc.reject}
			bf := &batchFilter{fakeFilter: fakeFilter{name: "F", reject: tc.reject}, fail: tc.fail}
			if tc.batch {
				p = bf
			}
			fw := newFW(t, map[string]framework.Plugin{"F": p}, &framework.Plugins{Filter: framework.PluginList{Enabled: []framework.PluginRef{{Name: "F"}}}})
			feasible, rejected, err := fw.Plugins().FindFeasible(context.Background(), framework.NewCycleState(), st.Pod("p"), all, tc.start, tc.toFind)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if len(feasible) != tc.wantFeasible {
				t.Fatalf("%d feasible, want %d", len(feasible), tc.wantFeasible)
			}
			for _, ni := range feasible {
				if tc.reject.Has(ni.Node().Name) {
					t.Errorf("rejected node %s is feasible", ni.Node().Name)
				}
			}
			n := 0
			for i, s := range rejected {
				if s == nil {
					continue
				}
				n++
				if name := all[(tc.start+i)%len(all)].Node().Name; !tc.reject.Has(name) || s.Plugin() != "F" {
					t.Errorf("walk position %d (%s) rejected by %q: %s", i, name, s.Plugin(), s.Message())
				}
			}
			if n < tc.wantRejectedAtLeast {
				t.Errorf("%d rejected nodes reported, want at least %d", n, tc.wantRejectedAtLeast)
			}
			if !tc.batch {
				return
			}
			// Blocks in walk order: the first call starts at the walk's start.
			bf.mu.Lock()
			defer bf.mu.Unlock()
			seen := sets.New[string]()
			for _, c := range bf.calls {
				for _, name := range c {
					if seen.Has(name) {
						t.Fatalf("node %s judged twice in one walk", name)
					}
					seen.Insert(name)
				}
			}
			if !seen.Has(all[tc.start].Node().Name) {
				t.Errorf("the walk's first node %s was never judged", all[tc.start].Node().Name)
			}
			if len(bf.calls) > 1+(tc.toFind+len(tc.reject))/32 {
				t.Errorf("%d batch calls for %d feasible nodes: blocks too small", len(bf.calls), tc.toFind)
			}
		})
	}
}

// TestScoreBatch: a batch Score plugin is asked once for every node (never per node),
// its scores are normalized and weighted like a per-node plugin's, and its error fails
// the cycle.
func TestScoreBatch(t *testing.T) {
	b := &batchScore{fakeScore: fakeScore{name: "B", raw: map[string]int64{"a": 10, "b": 20}, normalize: true}}
	p2 := &fakeScore{name: "P2", raw: map[string]int64{"a": 100, "b": 0}}
	fw := newFW(t, map[string]framework.Plugin{"B": b, "P2": p2}, &framework.Plugins{Score: framework.PluginList{Enabled: []framework.PluginRef{{Name: "B", Weight: 2}, {Name: "P2", Weight: 3}}}})
	out, s := fw.Plugins().RunScorePlugins(context.Background(), framework.NewCycleState(), st.Pod("p"), nodes("a", "b"))
	if !s.IsSuccess() {
		t.Fatal(s.Err())
	}
	// As TestScoreNormalizeAndWeights: a 100 + 300, b 200 + 0.
	if out[0].TotalScore != 400 || out[1].TotalScore != 200 || b.calls != 1 {
		t.Fatalf("totals %d %d after %d batch calls, want 400 200 after 1", out[0].TotalScore, out[1].TotalScore, b.calls)
	}
	if _, s := fw.Plugins().RunScorePlugins(context.Background(), framework.NewCycleState(), st.Pod("p"), nodes("a", "c")); s.Code() != framework.Error || s.Plugin() != "B" {
		t.Fatalf("a failed batch: %v by %q, want Error by B", s.Code(), s.Plugin())
	}
}

// TestParallelizerBlocks: blocks cover every index once, each of the given size but the
// last, for any worker count.
func TestParallelizerBlocks(t *testing.T) {
	for _, tc := range []struct{ workers, n, size int }{{1, 10, 3}, {16, 1000, 64}, {2, 64, 64}, {4, 5, 100}, {3, 0, 8}} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		framework.NewParallelizer(tc.workers).AtMost(tc.workers).Blocks(context.Background(), tc.n, tc.size, func(lo, hi int) {
			if hi-lo != tc.size && hi != tc.n {
				t.Errorf("%+v: block [%d, %d) is short and not last", tc, lo, hi)
			}
			mu.Lock()
			defer mu.Unlock()
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("%+v: index %d visited %d times", tc, i, c)
			}
		}
	}
}
