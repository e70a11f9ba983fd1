package podgc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func node(name string, ready bool, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func pod(name, nodeName string, phase corev1.PodPhase, age time.Duration, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Unix(1_000_000, 0).Add(-age))},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_000_000, 0)}
	}
	return p
}

func TestCollect(t *testing.T) {
	outOfService := corev1.Taint{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		threshold int
		// passes are the clock's offsets of successive collections.
		passes      []time.Duration
		wantDeleted []string
		// wantFailed: pods marked Failed, with DisruptionTarget DeletionByPodGC when true.
		wantFailed map[string]bool
	}{
		{name: "a pod of a node that is gone, after the quarantine",
			objs:   []runtime.Object{node("n1", true), pod("kept", "n1", corev1.PodRunning, time.Hour, false), pod("orphan", "gone", corev1.PodRunning, time.Hour, false)},
			passes: []time.Duration{0, 41 * time.Second}, wantDeleted: []string{"orphan"}, wantFailed: map[string]bool{"orphan": true}},
		{name: "within the quarantine nothing happens",
			objs:   []runtime.Object{pod("orphan", "gone", corev1.PodRunning, time.Hour, false)},
			passes: []time.Duration{0, 39 * time.Second}},
		{name: "a terminated pod of a node that is gone keeps its phase",
			objs:   []runtime.Object{pod("done", "gone", corev1.PodSucceeded, time.Hour, false)},
			passes: []time.Duration{0, time.Minute}, wantDeleted: []string{"done"}},
		{name: "deleted before it was scheduled",
			objs:   []runtime.Object{pod("unscheduled", "", corev1.PodPending, time.Hour, true), pod("pending", "", corev1.PodPending, time.Hour, false)},
			passes: []time.Duration{0}, wantDeleted: []string{"unscheduled"}, wantFailed: map[string]bool{"unscheduled": false}},
		{name: "terminating on a node down and out of service",
			objs: []runtime.Object{node("down", false, outOfService), node("up", true, outOfService), node("notready", false),
				pod("on-down", "down", corev1.PodRunning, time.Hour, true), pod("on-up", "up", corev1.PodRunning, time.Hour, true),
				pod("on-notready", "notready", corev1.PodRunning, time.Hour, true)},
			passes: []time.Duration{0}, wantDeleted: []string{"on-down"}, wantFailed: map[string]bool{"on-down": false}},
		{name: "terminated pods over the threshold, oldest first", threshold: 2,
			objs: []runtime.Object{node("n1", true), pod("old", "n1", corev1.PodSucceeded, 3*time.Hour, false), pod("older", "n1", corev1.PodFailed, 4*time.Hour, false),
				pod("new", "n1", corev1.PodSucceeded, time.Hour, false), pod("newer", "n1", corev1.PodFailed, time.Minute, false),
				pod("running", "n1", corev1.PodRunning, 9*time.Hour, false)},
			passes: []time.Duration{0}, wantDeleted: []string{"old", "older"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(tc.objs...) //nolint:staticcheck // NewClientset cannot strategic-merge-patch without apply configurations
			factory := informers.NewSharedInformerFactory(client, 0)
			clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
			c := New(client, factory, Options{TerminatedThreshold: tc.threshold, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			ctx, cancel := context.WithCancel(context.Background())
			factory.Start(ctx.Done())
			defer func() { cancel(); factory.Shutdown() }()
			if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
				t.Fatal("caches did not sync")
			}
			start := clk.Now()
			for _, d := range tc.passes {
				clk.SetTime(start.Add(d))
				if err := c.Collect(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var deleted []string
			for _, a := range client.Actions() {
				if da, ok := a.(interface{ GetName() string }); ok && a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
					deleted = append(deleted, da.GetName())
				}
			}
			slices.Sort(deleted)
			want := slices.Sorted(slices.Values(tc.wantDeleted))
			if !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
			// The status patches sent before the deletions (the fake drops the pods).
			failed := map[string]bool{}
			for _, a := range client.Actions() {
				if pa, ok := a.(clienttesting.PatchAction); ok && pa.GetSubresource() == "status" {
					var patch struct {
						Status corev1.PodStatus `json:"status"`
					}
					if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
						t.Fatal(err)
					}
					if patch.Status.Phase != corev1.PodFailed {
						t.Errorf("%s: status patch %s does not fail the pod", pa.GetName(), pa.GetPatch())
					}
					failed[pa.GetName()] = slices.ContainsFunc(patch.Status.Conditions, func(c corev1.PodCondition) bool {
						return c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByPodGC"
					})
				}
			}
			if len(failed) != len(tc.wantFailed) {
				t.Errorf("marked failed %v, want %v", failed, tc.wantFailed)
			}
			for name, disrupted := range tc.wantFailed {
				if got, ok := failed[name]; !ok || got != disrupted {
					t.Errorf("%s: marked failed %v with DisruptionTarget %v, want with DisruptionTarget %v", name, ok, got, disrupted)
				}
			}
		})
	}
}
