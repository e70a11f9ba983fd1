package queue

import (
	"context"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/queuesort"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func newQueue() (*PriorityQueue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return New((&queuesort.PrioritySort{}).Less, Options{Clock: clk}), clk
}

func prioPod(name string, prio int32) *v1.Pod {
	p := st.Pod(name)
	p.Spec.Priority = &prio
	return p
}

func pop(t *testing.T, q *PriorityQueue) *framework.QueuedPodInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pi := q.Pop(ctx)
	if pi == nil {
		t.Fatal("Pop returned nothing")
	}
	return pi
}

func TestActiveQOrdering(t *testing.T) {
	q, clk := newQueue()
	for _, p := range []*v1.Pod{prioPod("low", 1), prioPod("mid-old", 5), prioPod("high", 10), prioPod("mid-new", 5)} {
		q.Add(p)
		clk.Step(time.Millisecond)
	}
	var got []string
	for range 4 {
		got = append(got, pop(t, q).Pod.Name)
	}
	want := []string{"high", "mid-old", "mid-new", "low"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestBackoffIsExponentialAndCapped(t *testing.T) {
	q, clk := newQueue()
	q.Add(st.Pod("p"))
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		want *= time.Second
		pi := pop(t, q)
		q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), true)
		if a, b, _ := q.Lens(); a != 0 || b != 1 {
			t.Fatalf("attempt %d: active=%d backoff=%d", i+1, a, b)
		}
		clk.Step(want - 10*time.Millisecond)
		q.FlushBackoffQCompleted()
		if a, _, _ := q.Lens(); a != 0 {
			t.Fatalf("attempt %d: left backoff before %v", i+1, want)
		}
		clk.Step(20 * time.Millisecond)
		q.FlushBackoffQCompleted()
		if a, _, _ := q.Lens(); a != 1 {
			t.Fatalf("attempt %d: still in backoff after %v", i+1, want)
		}
	}
}

func TestUnschedulableMovedByEventsNotTimers(t *testing.T) {
	q, clk := newQueue()
	q.Add(st.Pod("p"))
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), false)
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("pod not in the unschedulable pool")
	}
	clk.Step(2 * time.Second)
	q.FlushBackoffQCompleted()
	if a, b, u := q.Lens(); a+b != 0 || u != 1 {
		t.Fatalf("timer moved an unschedulable pod: %d %d %d", a, b, u)
	}
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd)
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatalf("event did not move the pod to activeQ: active=%d unschedulable=%d", a, u)
	}
}

func TestMoveWhileBackingOffGoesToBackoffQ(t *testing.T) {
	q, clk := newQueue()
	q.Add(st.Pod("p"))
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), false)
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd)
	if a, b, _ := q.Lens(); a != 0 || b != 1 {
		t.Fatalf("active=%d backoff=%d, want 0 1", a, b)
	}
	clk.Step(time.Second + time.Millisecond)
	q.FlushBackoffQCompleted()
	if a, _, _ := q.Lens(); a != 1 {
		t.Fatal("not flushed after backoff")
	}
}

func TestEventDuringCycleIsNotLost(t *testing.T) {
	q, _ := newQueue()
	q.Add(st.Pod("p"))
	pi := pop(t, q)
	cycle := q.SchedulingCycle()
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd) // a node appears while p is being scheduled
	q.AddUnschedulableIfNotPresent(pi, cycle, false)
	if _, b, u := q.Lens(); b != 1 || u != 0 {
		t.Fatalf("backoff=%d unschedulable=%d, want 1 0", b, u)
	}
}

func TestFlushUnschedulableLeftover(t *testing.T) {
	q, clk := newQueue()
	q.Add(st.Pod("p"))
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), false)
	clk.Step(4 * time.Minute)
	q.FlushUnschedulablePodsLeftover()
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("flushed too early")
	}
	clk.Step(2 * time.Minute)
	q.FlushUnschedulablePodsLeftover()
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatal("not flushed after 5 minutes")
	}
}

func TestUpdateUnschedulablePod(t *testing.T) {
	q, clk := newQueue()
	p := st.Pod("p")
	p.ResourceVersion = "1"
	q.Add(p)
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), false)
	clk.Step(2 * time.Second)
	status := p.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
	q.Update(p, status)
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("a status-only update moved the pod")
	}
	relabeled := status.DeepCopy()
	relabeled.ResourceVersion = "3"
	relabeled.Labels = map[string]string{"a": "b"}
	q.Update(status, relabeled)
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatal("a spec/label update did not move the pod")
	}
}

func TestDeleteAndPopCancel(t *testing.T) {
	q, _ := newQueue()
	p := st.Pod("p")
	q.Add(p)
	q.Delete(p)
	if q.Has(p.UID) {
		t.Fatal("pod still queued")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *framework.QueuedPodInfo)
	go func() { done <- q.Pop(ctx) }()
	cancel()
	select {
	case pi := <-done:
		if pi != nil {
			t.Fatal("Pop returned a pod after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pop did not return on cancel")
	}
}

func TestActivate(t *testing.T) {
	q, _ := newQueue()
	p := st.Pod("p")
	q.Add(p)
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), true)
	q.Activate(p.UID)
	if a, b, _ := q.Lens(); a != 1 || b != 0 {
		t.Fatal("Activate did not move the pod")
	}
}

func TestPopFromBackoffQWhenIdle(t *testing.T) {
	q, _ := newQueue()
	q.Add(st.Pod("moved"))
	pi := pop(t, q)
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), false)
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd) // still backing off → backoffQ
	if _, b, _ := q.Lens(); b != 1 {
		t.Fatal("pod not in backoffQ")
	}
	pi = pop(t, q) // activeQ is empty: taken from backoffQ at once
	if pi.Pod.Name != "moved" {
		t.Fatalf("popped %s", pi.Pod.Name)
	}
	q.AddUnschedulableIfNotPresent(pi, q.SchedulingCycle(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if p := q.Pop(ctx); p != nil {
		t.Fatal("a pod backing off after an error was popped early")
	}
}
