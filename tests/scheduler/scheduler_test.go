package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func nodeName(i int) string { return fmt.Sprintf("node-%02d", i) }

func nodeSet(from, to int) sets.Set[string] {
	s := sets.New[string]()
	for i := from; i <= to; i++ {
		s.Insert(nodeName(i))
	}
	return s
}

// clusterOf100 creates 100 nodes:
//
//	00–79 plain: 4 cpu, 8Gi, zone a/b alternating, disk=hdd
//	80–84 gpu: 8 cpu, taint dedicated=gpu:NoSchedule, gpu=true
//	85–89 cordoned (spec.unschedulable), cordon=yes
//	90–94 ssd: 4 cpu, disk=ssd; 90–92 also PreferNoSchedule noisy=true
//	95–99 big: 64 cpu, 256Gi, size=big, zone a/b alternating
func clusterOf100(t *testing.T, e *env) {
	for i := 0; i < 100; i++ {
		n := nodeSpec{name: nodeName(i), cpu: "4", mem: "8Gi", labels: map[string]string{}}
		zone := []string{"a", "b"}[i%2]
		switch {
		case i < 80:
			n.labels["zone"], n.labels["disk"] = zone, "hdd"
		case i < 85:
			n.cpu = "8"
			n.labels["gpu"] = "true"
			n.taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
		case i < 90:
			n.unschedulbl = true
			n.labels["cordon"] = "yes"
		case i < 95:
			n.labels["disk"] = "ssd"
			if i < 93 {
				n.taints = []v1.Taint{{Key: "noisy", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}
			}
		default:
			n.cpu, n.mem = "64", "256Gi"
			n.labels["size"], n.labels["zone"] = "big", zone
		}
		e.createNode(t, n)
	}
}

func TestPlacement100Nodes(t *testing.T) {
	e := startEnv(t, nil)
	clusterOf100(t, e)
	const ns = "place"
	e.createNamespace(t, ns)

	hostPort := func(name string) *v1.Pod {
		p := basePod(ns, name)
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 9000}}
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"node-10", "node-11"}}}}},
		}}}
		return p
	}
	cases := []struct {
		name string
		pod  func() *v1.Pod
		want sets.Set[string]
	}{
		{"nodeselector-ssd-avoids-prefer-noschedule", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			return p
		}, nodeSet(93, 94)},
		{"tolerates-gpu-taint", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.NodeSelector = map[string]string{"gpu": "true"}
			p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
			return p
		}, nodeSet(80, 84)},
		{"tolerates-cordon", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.NodeSelector = map[string]string{"cordon": "yes"}
			p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			return p
		}, nodeSet(85, 89)},
		{"required-affinity-zone-b-big", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}},
					{Key: "size", Operator: v1.NodeSelectorOpExists},
				}}},
			}}}
			return p
		}, sets.New(nodeName(95), nodeName(97), nodeName(99))},
		{"preferred-affinity-big", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
				{Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "size", Operator: v1.NodeSelectorOpIn, Values: []string{"big"}}}}},
			}}}
			return p
		}, nodeSet(95, 99)},
		{"cpu-10-fits-only-big", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.Containers[0].Resources = requests("10", "1Gi")
			return p
		}, nodeSet(95, 99)},
		{"init-container-20-cpu-fits-only-big", func() *v1.Pod {
			p := basePod(ns, "")
			p.Spec.Containers[0].Resources = requests("1", "1Gi")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "registry.example/init:1", Resources: requests("20", "")}}
			return p
		}, nodeSet(95, 99)},
		{"hostport-1", func() *v1.Pod { return hostPort("") }, nodeSet(10, 11)},
		{"hostport-2", func() *v1.Pod { return hostPort("") }, nodeSet(10, 11)},
	}
	bound := map[string]string{}
	for _, tc := range cases {
		p := tc.pod()
		p.Name = tc.name
		e.createPod(t, p)
	}
	for _, tc := range cases {
		got := e.waitBound(t, ns, tc.name, 20*time.Second)
		if !tc.want.Has(got.Spec.NodeName) {
			t.Errorf("%s: landed on %s, want one of %v", tc.name, got.Spec.NodeName, sets.List(tc.want))
		}
		bound[tc.name] = got.Spec.NodeName
		var scheduled bool
		for _, c := range got.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
				scheduled = true
			}
		}
		if !scheduled {
			t.Errorf("%s: no PodScheduled=True condition", tc.name)
		}
	}
	if bound["hostport-1"] == bound["hostport-2"] {
		t.Errorf("two pods with hostPort 9000 share node %s", bound["hostport-1"])
	}

	// A third hostPort pod fits nowhere; the message counts every node's reason.
	e.createPod(t, func() *v1.Pod { p := hostPort(""); p.Name = "hostport-3"; return p }())
	cond := e.waitUnschedulable(t, ns, "hostport-3", 20*time.Second)
	want := "0/100 nodes are available: 2 node(s) didn't have free ports for the requested pod ports, 5 node(s) had untolerated taint {dedicated: gpu}, 5 node(s) were unschedulable, 88 node(s) didn't match Pod's node affinity/selector." +
		" preemption: 0/100 nodes are available: 2 No preemption victims found for incoming pod, 98 Preemption is not helpful for scheduling."
	if cond.Message != want {
		t.Errorf("message\n got  %q\n want %q", cond.Message, want)
	}

	// A pod selecting the gpu nodes without tolerating their taint.
	p := basePod(ns, "untolerated-gpu")
	p.Spec.NodeSelector = map[string]string{"gpu": "true"}
	e.createPod(t, p)
	cond = e.waitUnschedulable(t, ns, "untolerated-gpu", 20*time.Second)
	want = "0/100 nodes are available: 5 node(s) had untolerated taint {dedicated: gpu}, 5 node(s) were unschedulable, 90 node(s) didn't match Pod's node affinity/selector." +
		" preemption: 0/100 nodes are available: 100 Preemption is not helpful for scheduling."
	if cond.Message != want {
		t.Errorf("message\n got  %q\n want %q", cond.Message, want)
	}
}

// TestUnschedulableThenNodeAppears: the pod gets PodScheduled=False and a FailedScheduling
// event, waits in the unschedulable pool (no timer retries it for 5 minutes), and is bound
// as soon as a fitting node is added — moved by the NodeAdd event.
func TestUnschedulableThenNodeAppears(t *testing.T) {
	e := startEnv(t, nil)
	for i := 0; i < 3; i++ {
		e.createNode(t, nodeSpec{name: nodeName(i), cpu: "2", mem: "4Gi"})
	}
	const ns = "requeue"
	e.createNamespace(t, ns)
	p := basePod(ns, "huge")
	p.Spec.Containers[0].Resources = requests("16", "1Gi")
	e.createPod(t, p)

	cond := e.waitUnschedulable(t, ns, "huge", 20*time.Second)
	if want := "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."; cond.Message != want {
		t.Errorf("condition message %q, want %q", cond.Message, want)
	}
	ctx := context.Background()
	// A core/v1 Event, as `kubectl describe pod` shows it.
	waitFor(t, 20*time.Second, "FailedScheduling event", func() (bool, error) {
		evs, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "FailedScheduling" && ev.InvolvedObject.Name == "huge" && ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "Insufficient cpu") &&
				ev.Source.Component == "default-scheduler" {
				return true, nil
			}
		}
		return false, nil
	})
	pod, err := e.client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "pod parked in the unschedulable pool", func() (bool, error) {
		return e.sched.Queue().UnschedulableUIDs().Has(pod.UID), nil
	})
	attempts := e.counter(t, "scheduler_schedule_attempts_total", map[string]string{"result": "unschedulable", "profile": "default-scheduler"})

	e.createNode(t, nodeSpec{name: "big", cpu: "32", mem: "64Gi"})
	// Only an event can move a pod out of the unschedulable pool before the 5-minute
	// flush, and the move does not wait for the 1 s backoff tick when the queue is idle:
	// bound within a second of the node appearing.
	got := e.waitBound(t, ns, "huge", time.Second)
	if got.Spec.NodeName != "big" {
		t.Fatalf("bound to %s", got.Spec.NodeName)
	}
	if after := e.counter(t, "scheduler_schedule_attempts_total", map[string]string{"result": "unschedulable", "profile": "default-scheduler"}); after != attempts {
		t.Errorf("unschedulable attempts went %v → %v: retried without an event", attempts, after)
	}
}

// TestProfilesBySchedulerName: a bin-packing profile (ClusterAutoscalerProvider,
// MostAllocated) next to the default one (LeastAllocated); pods naming no known profile
// are left alone.
func TestProfilesBySchedulerName(t *testing.T) {
	cfg, err := scheduler.ParseConfig([]byte(`
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  provider: ClusterAutoscalerProvider
`))
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, cfg)
	e.createNode(t, nodeSpec{name: "used", cpu: "4", mem: "8Gi"})
	e.createNode(t, nodeSpec{name: "empty", cpu: "4", mem: "8Gi"})
	const ns = "profiles"
	e.createNamespace(t, ns)
	filler := basePod(ns, "filler")
	filler.Spec.NodeName = "used"
	filler.Spec.Containers[0].Resources = requests("2", "4Gi")
	e.createPod(t, filler)
	waitFor(t, 10*time.Second, "filler in the scheduler cache", func() (bool, error) { return e.sched.Cache().PodCount() == 1, nil })

	for _, tc := range []struct{ name, scheduler, want string }{
		{"spread", "", "empty"},
		{"pack", "bin-packing", "used"},
	} {
		p := basePod(ns, tc.name)
		p.Spec.SchedulerName = tc.scheduler
		p.Spec.Containers[0].Resources = requests("1", "2Gi")
		e.createPod(t, p)
		if got := e.waitBound(t, ns, tc.name, 20*time.Second); got.Spec.NodeName != tc.want {
			t.Errorf("%s (schedulerName %q): on %s, want %s", tc.name, tc.scheduler, got.Spec.NodeName, tc.want)
		}
	}
	// The attempt is counted when the binding cycle returns, which can be just after a
	// watcher sees the pod bound.
	waitFor(t, 10*time.Second, "one scheduled attempt counted for bin-packing", func() (bool, error) {
		return e.counter(t, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled", "profile": "bin-packing"}) == 1, nil
	})

	other := basePod(ns, "other-scheduler")
	other.Spec.SchedulerName = "someone-else"
	e.createPod(t, other)
	marker := basePod(ns, "marker")
	e.createPod(t, marker)
	e.waitBound(t, ns, "marker", 20*time.Second)
	got, err := e.client.CoreV1().Pods(ns).Get(context.Background(), "other-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" || len(got.Status.Conditions) != 0 {
		t.Errorf("a pod of another scheduler was touched: node %q conditions %v", got.Spec.NodeName, got.Status.Conditions)
	}
}
