package schedplugin_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/schedplugin"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	v1 "k8s.io/api/core/v1"
)

// recorder is a Caller that records the batches it is asked about; it rejects the
// nodes named in reject and fails every call when fail is set.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	reject  map[string]bool
	fail    error
	full    bool     // the guest asked for whole pods
	pods    []string // the pod document of each call
}

func (r *recorder) Filter(_ context.Context, in *wasm.SchedulingInput) (*abi.FilterResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	r.pods = append(r.pods, string(in.Pod))
	resp := &abi.FilterResponse{}
	for _, d := range in.Nodes {
		names = append(names, d.Name)
		resp.Pass = append(resp.Pass, !r.reject[d.Name])
		resp.Reasons = append(resp.Reasons, map[bool]string{true: "rejected " + d.Name}[r.reject[d.Name]])
	}
	r.batches = append(r.batches, names)
	if r.fail != nil {
		return nil, r.fail
	}
	return resp, nil
}

func (r *recorder) Score(context.Context, *wasm.SchedulingInput) ([]int64, error) {
	return nil, errors.New("not used")
}

func (r *recorder) WantsRequested() bool { return false }

func (r *recorder) WantsFullPods() bool { return r.full }

// TestFilterWindows: Filter asks the guest about a window of the candidate nodes from
// the first unjudged node the framework asks about, not about the whole cluster, and
// never about a node twice in one cycle.
func TestFilterWindows(t *testing.T) {
	nodes := cluster(5000)
	name := func(i int) string { return nodes[i%len(nodes)].Node().Name }
	rec := &recorder{reject: map[string]bool{name(120): true}}
	ps := newFramework(t, framework.Extension{Plugin: adapter(t, schedplugin.Config{Name: "wasm:rec", Filter: true, Plugin: rec})}).Plugins()
	ctx := context.Background()
	p := pod("web", "100m")
	state := framework.NewCycleState()
	if _, st := ps.RunPreFilterPlugins(ctx, state, p, nodes); !st.IsSuccess() {
		t.Fatal(st.Err())
	}
	if len(rec.batches) != 0 {
		t.Fatalf("PreFilter called the guest %d times; it waits for Filter", len(rec.batches))
	}
	const window = 256
	for i := 100; i < 100+window; i++ {
		st := ps.RunFilterPlugins(ctx, state, p, nodes[i])
		if i == 120 {
			if !st.IsRejected() || !strings.Contains(st.Message(), "rejected "+name(120)) {
				t.Fatalf("node 120: %v %q, want its rejection", st.Code(), st.Message())
			}
		} else if !st.IsSuccess() {
			t.Fatalf("node %d: %v", i, st.Message())
		}
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != window || rec.batches[0][0] != name(100) || rec.batches[0][window-1] != name(100+window-1) {
		t.Fatalf("batches %d (first of %d nodes); want one of %d from node 100", len(rec.batches), len(rec.batches[0]), window)
	}
	// A node before the window: the run of unjudged nodes up to the judged ones.
	if st := ps.RunFilterPlugins(ctx, state, p, nodes[40]); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if len(rec.batches) != 2 || len(rec.batches[1]) != 60 || rec.batches[1][59] != name(99) {
		t.Fatalf("second batch has %d nodes, want nodes 40–99", len(rec.batches[len(rec.batches)-1]))
	}
	// The framework's walk stopped (its context is cancelled): no more guest calls.
	walk, cancel := context.WithCancel(ctx)
	cancel()
	if st := ps.RunFilterPlugins(walk, state, p, nodes[3000]); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if len(rec.batches) != 2 {
		t.Fatalf("the guest was called after the walk stopped")
	}
	// Wrapping: a window near the end continues at the start, up to the judged run.
	if st := ps.RunFilterPlugins(ctx, state, p, nodes[4990]); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	if got := rec.batches[2]; len(got) != 10+40 || got[10] != name(0) {
		t.Fatalf("wrapping batch has %d nodes, want 4990–4999 and 0–39", len(got))
	}
}

// TestFilterWindowFailure: a failed guest call fails the node's Filter with Error and
// every later Filter of the cycle without calling again; under Ignore every node passes.
func TestFilterWindowFailure(t *testing.T) {
	nodes := cluster(1000)
	for _, ignore := range []bool{false, true} {
		rec := &recorder{fail: errors.New("boom")}
		ps := newFramework(t, framework.Extension{Plugin: adapter(t, schedplugin.Config{Name: "wasm:rec", Filter: true, Ignore: ignore, Plugin: rec})}).Plugins()
		ctx := context.Background()
		p := pod("web", "100m")
		state := framework.NewCycleState()
		if _, st := ps.RunPreFilterPlugins(ctx, state, p, nodes); !st.IsSuccess() {
			t.Fatal(st.Err())
		}
		for _, i := range []int{0, 900} {
			st := ps.RunFilterPlugins(ctx, state, p, nodes[i])
			if ignore != st.IsSuccess() || (!ignore && (st.Code() != framework.Error || !strings.Contains(st.Message(), "boom"))) {
				t.Fatalf("ignore=%v node %d: %v %q", ignore, i, st.Code(), st.Message())
			}
		}
		if len(rec.batches) != 1 {
			t.Fatalf("ignore=%v: %d guest calls, want 1", ignore, len(rec.batches))
		}
	}
}

// TestFilterBatchWalk: in the scheduler's walk the guest is asked about blocks of the
// walk, never about a node twice, and about few nodes past the walk's stop; its reasons
// become the nodes' statuses; a failed call ends the walk with the error, or under
// Ignore lets every node pass.
func TestFilterBatchWalk(t *testing.T) {
	nodes := cluster(5000)
	const start, toFind = 4900, 500
	rejected := map[string]bool{nodes[4950].Node().Name: true, nodes[10].Node().Name: true}
	cases := []struct {
		name   string
		ignore bool
		fail   error
	}{{name: "ok"}, {name: "fail", fail: errors.New("boom")}, {name: "ignore", ignore: true, fail: errors.New("boom")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{reject: rejected, fail: tc.fail}
			ps := newFramework(t, framework.Extension{Plugin: adapter(t, schedplugin.Config{Name: "wasm:rec", Filter: true, Ignore: tc.ignore, Plugin: rec})}).Plugins()
			ctx, p, state := context.Background(), pod("web", "100m"), framework.NewCycleState()
			if _, st := ps.RunPreFilterPlugins(ctx, state, p, nodes); !st.IsSuccess() {
				t.Fatal(st.Err())
			}
			feasible, statuses, err := ps.FindFeasible(ctx, state, p, nodes, start, toFind)
			if tc.fail != nil && !tc.ignore {
				if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "wasm:rec") {
					t.Fatalf("walk error %v, want the guest's failure naming the plugin", err)
				}
				return
			}
			if err != nil || len(feasible) != toFind {
				t.Fatalf("%d feasible, err %v; want %d", len(feasible), err, toFind)
			}
			judged := map[string]bool{}
			for _, b := range rec.batches {
				if len(b) > 64 {
					t.Errorf("a guest call judged %d nodes", len(b))
				}
				for _, n := range b {
					if judged[n] {
						t.Fatalf("node %s judged twice", n)
					}
					judged[n] = true
				}
			}
			// Under Ignore the first failed call settles the cycle (every node passes
			// without another call), and the walk's blocks run on parallel workers: the
			// failing call may be any block's, not necessarily the first one's.
			if tc.ignore && len(rec.batches) == 0 {
				t.Error("the guest was never called")
			}
			if !tc.ignore && !judged[nodes[start].Node().Name] {
				t.Error("the walk's first node was not judged")
			}
			if len(judged) > toFind+len(rejected)+2*64 {
				t.Errorf("%d nodes judged to find %d", len(judged), toFind)
			}
			if tc.ignore {
				return
			}
			for i, st := range statuses {
				name := nodes[(start+i)%len(nodes)].Node().Name
				if rejected[name] != (st != nil) {
					t.Errorf("%s: status %v, rejected by the guest %v", name, st, rejected[name])
				}
				if st != nil && (st.Message() != "rejected "+name || st.Plugin() != "wasm:rec") {
					t.Errorf("%s: %q by %q", name, st.Message(), st.Plugin())
				}
			}
		})
	}
}

// TestPodDocument: the guest gets the compact pod document unless it asked for whole
// pods, serialized once per cycle.
func TestPodDocument(t *testing.T) {
	nodes := cluster(200)
	for _, full := range []bool{false, true} {
		rec := &recorder{full: full}
		ps := newFramework(t, framework.Extension{Plugin: adapter(t, schedplugin.Config{Name: "wasm:rec", Filter: true, Plugin: rec})}).Plugins()
		ctx, p, state := context.Background(), pod("web", "100m"), framework.NewCycleState()
		p.Spec.Volumes = []v1.Volume{{Name: "data"}}
		if _, st := ps.RunPreFilterPlugins(ctx, state, p, nodes); !st.IsSuccess() {
			t.Fatal(st.Err())
		}
		if _, _, err := ps.FindFeasible(ctx, state, p, nodes, 0, len(nodes)); err != nil {
			t.Fatal(err)
		}
		if len(rec.pods) < 2 {
			t.Fatalf("full=%v: %d guest calls, want several blocks", full, len(rec.pods))
		}
		for _, doc := range rec.pods {
			if doc != rec.pods[0] {
				t.Fatalf("full=%v: the pod document changed within a cycle", full)
			}
		}
		if got := strings.Contains(rec.pods[0], `"volumes"`); got != full {
			t.Errorf("full=%v: pod document %s", full, rec.pods[0])
		}
		if !strings.Contains(rec.pods[0], `"cpu":"100m"`) {
			t.Errorf("full=%v: pod document lacks the request: %s", full, rec.pods[0])
		}
	}
}
