package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	v1 "k8s.io/api/core/v1"
)

// avoidNode is an out-of-tree Filter+Score plugin (what the WASM adapter will register).
type avoidNode struct {
	name, avoid string
	calls       atomic.Int64
}

// Name implements framework.Plugin.
func (a *avoidNode) Name() string { return a.name }

// Filter rejects the avoided node.
func (a *avoidNode) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	a.calls.Add(1)
	if ni.Node().Name == a.avoid {
		return framework.NewStatus(framework.Unschedulable, "node(s) avoided by "+a.name)
	}
	return nil
}

// Score is neutral.
func (a *avoidNode) Score(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) (int64, *framework.Status) {
	return 0, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (a *avoidNode) ScoreExtensions() framework.ScoreExtensions { return nil }

// TestExtensionHotSwapUnderLoad swaps an out-of-tree plugin while 200 pods are being
// scheduled: no attempt fails, and pods scheduled after the swap obey the new plugin.
func TestExtensionHotSwapUnderLoad(t *testing.T) {
	e := startEnv(t, nil)
	for i := 0; i < 4; i++ {
		e.createNode(t, nodeSpec{name: nodeName(i), cpu: "64", mem: "256Gi"})
	}
	const ns = "swap"
	e.createNamespace(t, ns)
	v1p := &avoidNode{name: "Avoid", avoid: nodeName(0)}
	if err := e.sched.SetExtension(framework.Extension{Plugin: v1p, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			p := basePod(ns, fmt.Sprintf("p-%03d", i))
			p.Spec.Containers[0].Resources = requests("10m", "10Mi")
			if _, err := e.client.CoreV1().Pods(ns).Create(context.Background(), p, metavOpts()); err != nil {
				t.Errorf("create: %v", err)
				return
			}
		}
	}()
	// Swap while pods flow: version 2 avoids node-01 instead.
	waitFor(t, 20*time.Second, "some pods scheduled with v1", func() (bool, error) { return v1p.calls.Load() > 50, nil })
	v2p := &avoidNode{name: "Avoid", avoid: nodeName(1)}
	if err := e.sched.SetExtension(framework.Extension{Plugin: v2p, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	<-done
	for i := 0; i < 200; i++ {
		e.waitBound(t, ns, fmt.Sprintf("p-%03d", i), 30*time.Second)
	}
	if n := e.counter(t, "scheduler_schedule_attempts_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%v scheduling attempts failed with an error during the swap", n)
	}
	if n := e.counter(t, "scheduler_schedule_attempts_total", map[string]string{"result": "unschedulable"}); n != 0 {
		t.Errorf("%v attempts unschedulable during the swap", n)
	}
	// After the swap, a new pod never lands on node-01.
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("after-%d", i)
		e.createPod(t, basePod(ns, name))
		if got := e.waitBound(t, ns, name, 20*time.Second); got.Spec.NodeName == nodeName(1) {
			t.Fatalf("%s landed on %s, avoided by the swapped-in plugin", name, got.Spec.NodeName)
		}
	}
	if v2p.calls.Load() == 0 {
		t.Fatal("the swapped-in plugin was never called")
	}
	e.sched.RemoveExtension("Avoid")
}
