package cache

import (
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func onNode(p *v1.Pod, node string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	return p
}

func TestAssumeForgetConfirmExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := New(30*time.Second, clk, nil)
	c.AddNode(st.Node("n1", st.Res("cpu", "4")))
	snap := framework.NewEmptySnapshot()
	cpuOn := func() int64 {
		c.UpdateSnapshot(snap)
		ni, err := snap.Get("n1")
		if err != nil {
			t.Fatal(err)
		}
		return ni.Requested.MilliCPU
	}

	p := onNode(st.Pod("p", st.Res("cpu", "1")), "n1")
	if err := c.AssumePod(p); err != nil {
		t.Fatal(err)
	}
	if got := cpuOn(); got != 1000 || !c.IsAssumedPod(p) {
		t.Fatalf("assumed pod not accounted: %d", got)
	}
	if err := c.AssumePod(p); err == nil {
		t.Fatal("assumed twice")
	}
	if err := c.ForgetPod(p); err != nil {
		t.Fatal(err)
	}
	if got := cpuOn(); got != 0 {
		t.Fatalf("forgotten pod still accounted: %d", got)
	}

	// Assume, bind, informer confirms: no expiry.
	_ = c.AssumePod(p)
	_ = c.FinishBinding(p)
	if err := c.AddPod(p); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	c.CleanupExpiredAssumedPods()
	if got := cpuOn(); got != 1000 || c.IsAssumedPod(p) {
		t.Fatalf("confirmed pod lost: %d", got)
	}
	_ = c.RemovePod(p)

	// Assume and bind but never confirmed: expires after the TTL.
	q := onNode(st.Pod("q", st.Res("cpu", "2")), "n1")
	_ = c.AssumePod(q)
	_ = c.FinishBinding(q)
	clk.Step(29 * time.Second)
	c.CleanupExpiredAssumedPods()
	if cpuOn() != 2000 {
		t.Fatal("expired too early")
	}
	clk.Step(2 * time.Second)
	c.CleanupExpiredAssumedPods()
	if got := cpuOn(); got != 0 {
		t.Fatalf("assumed pod did not expire: %d", got)
	}
}

func TestConfirmOnOtherNode(t *testing.T) {
	c := New(0, nil, nil)
	c.AddNode(st.Node("n1", st.Res("cpu", "4")))
	c.AddNode(st.Node("n2", st.Res("cpu", "4")))
	p := st.Pod("p", st.Res("cpu", "1"))
	_ = c.AssumePod(onNode(p, "n1"))
	_ = c.AddPod(onNode(p, "n2"))
	snap := framework.NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	n1, _ := snap.Get("n1")
	n2, _ := snap.Get("n2")
	if n1.Requested.MilliCPU != 0 || n2.Requested.MilliCPU != 1000 {
		t.Fatalf("n1=%d n2=%d", n1.Requested.MilliCPU, n2.Requested.MilliCPU)
	}
}

func TestIncrementalSnapshot(t *testing.T) {
	c := New(0, nil, nil)
	for _, n := range []string{"a", "b", "c"} {
		c.AddNode(st.Node(n, st.Res("cpu", "4")))
	}
	snap := framework.NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	if snap.NumNodes() != 3 {
		t.Fatalf("%d nodes", snap.NumNodes())
	}
	a, b := snap.NodeInfoMap["a"], snap.NodeInfoMap["b"]
	_ = c.AddPod(onNode(st.Pod("p", st.Res("cpu", "1")), "b"))
	c.UpdateSnapshot(snap)
	if snap.NodeInfoMap["a"] != a {
		t.Fatal("unchanged node was re-cloned")
	}
	if snap.NodeInfoMap["b"] == b || snap.NodeInfoMap["b"].Requested.MilliCPU != 1000 || snap.NodeInfoList[snap.Index["b"]] != snap.NodeInfoMap["b"] {
		t.Fatal("changed node not updated in map and list")
	}
	if b.Requested.MilliCPU != 0 {
		t.Fatal("an older snapshot's node info was mutated")
	}
	c.RemoveNode(st.Node("a", st.Res("cpu", "4")))
	c.UpdateSnapshot(snap)
	if snap.NumNodes() != 2 {
		t.Fatalf("%d nodes after removal", snap.NumNodes())
	}
	if _, err := snap.Get("a"); err == nil {
		t.Fatal("removed node still in snapshot")
	}
}
