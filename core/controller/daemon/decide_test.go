package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = metav1.NewTime(time.Unix(10000, 0))

func newDS(mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "ds-uid", Generation: 2},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:latest"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
		},
	}
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

func node(name string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func TestShouldRun(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ds            *appsv1.DaemonSet
		node          *corev1.Node
		wantRun, stay bool
	}{
		{"plain node", newDS(), node("a"), true, true},
		{"node selector matches", newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node("a", func(n *corev1.Node) { n.Labels["disk"] = "ssd" }), true, true},
		{"node selector does not match", newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			node("a"), false, false},
		{"required affinity does not match", newDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}},
			}}}
		}), node("a"), false, false},
		{"untolerated NoSchedule: no new pod, an old one stays", newDS(), node("a", taint("dedicated", corev1.TaintEffectNoSchedule)), false, true},
		{"untolerated NoExecute: neither", newDS(), node("a", taint("dedicated", corev1.TaintEffectNoExecute)), false, false},
		{"tolerated NoExecute", newDS(func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}), node("a", taint("dedicated", corev1.TaintEffectNoExecute)), true, true},
		{"not-ready is tolerated by default", newDS(), node("a", taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), true, true},
		{"cordoned is tolerated by default", newDS(), node("a", taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), true, true},
		{"network-unavailable only with hostNetwork", newDS(), node("a", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), false, true},
		{"network-unavailable with hostNetwork", newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }),
			node("a", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), true, true},
		{"template nodeName elsewhere", newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "b" }), node("a"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, stay := shouldRun(tc.ds, tc.node)
			if run != tc.wantRun || stay != tc.stay {
				t.Errorf("shouldRun = %v, %v; want %v, %v", run, stay, tc.wantRun, tc.stay)
			}
		})
	}
}

func TestNewPod(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}}
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}},
		}}}
	})
	pod := newPod(ds, "h1", "node-7")
	if pod.GenerateName != "agent-" || pod.Labels[history.HashLabel] != "h1" || pod.Labels["app"] != "agent" {
		t.Errorf("metadata = %+v", pod.ObjectMeta)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID {
		t.Errorf("controller = %+v", ref)
	}
	if pod.Spec.NodeName != "" || targetNode(pod) != "node-7" {
		t.Errorf("nodeName %q, target %q: want an affinity on node-7 for the scheduler to bind", pod.Spec.NodeName, targetNode(pod))
	}
	if len(pod.Spec.Tolerations) != len(defaultTolerations) {
		t.Errorf("%d tolerations, want the user's not-ready one kept plus the other %d defaults: %+v", len(pod.Spec.Tolerations), len(defaultTolerations)-1, pod.Spec.Tolerations)
	}
	if ds.Spec.Template.Labels[history.HashLabel] != "" || len(ds.Spec.Template.Spec.Tolerations) != 1 {
		t.Error("newPod changed the DaemonSet's template")
	}
}

// pod returns a daemon pod on node of revision hash; mutations set its state.
func pod(name, nodeName, hash string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), Labels: map[string]string{history.HashLabel: hash},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:   corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func ready(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
}

func failed(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &now }

func newer(p *corev1.Pod) { p.CreationTimestamp = now }

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func state(name string, run, stay bool, pods ...*corev1.Pod) nodeState {
	return nodeState{name: name, run: run, stay: stay, pods: pods}
}

func TestManage(t *testing.T) {
	surge := newDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}
	})
	for _, tc := range []struct {
		name       string
		ds         *appsv1.DaemonSet
		nodes      []nodeState
		orphans    []*corev1.Pod
		backoff    bool
		wantCreate []string
		wantRemove []string
	}{
		{name: "pods where missing", ds: newDS(), nodes: []nodeState{state("a", true, true), state("b", true, true, pod("p", "b", "h")), state("c", false, false)},
			wantCreate: []string{"a"}},
		{name: "a terminating pod blocks its replacement", ds: newDS(), nodes: []nodeState{state("a", true, true, pod("p", "a", "h", deleting))}},
		{name: "failed pod deleted", ds: newDS(), nodes: []nodeState{state("a", true, true, pod("p", "a", "h", failed))}, wantRemove: []string{"p"}},
		{name: "failed pod kept during backoff", ds: newDS(), backoff: true, nodes: []nodeState{state("a", true, true, pod("p", "a", "h", failed))}},
		{name: "extra pods: the oldest stays", ds: newDS(), nodes: []nodeState{state("a", true, true, pod("old", "a", "h"), pod("new", "a", "h", newer))},
			wantRemove: []string{"new"}},
		{name: "surge keeps one of each revision", ds: surge, nodes: []nodeState{state("a", true, true, pod("old", "a", "h0"), pod("cur", "a", "h", newer), pod("cur2", "a", "h", newer, func(p *corev1.Pod) { p.Name = "cur2" }))},
			wantRemove: []string{"cur2"}},
		{name: "node no longer eligible", ds: newDS(), nodes: []nodeState{state("a", false, false, pod("p", "a", "h"), pod("q", "a", "h", deleting))},
			wantRemove: []string{"p"}},
		{name: "NoSchedule taint keeps the pod", ds: newDS(), nodes: []nodeState{state("a", false, true, pod("p", "a", "h"))}},
		{name: "pod of a deleted node", ds: newDS(), orphans: []*corev1.Pod{pod("gone", "x", "h")}, wantRemove: []string{"gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := manage(tc.ds, tc.nodes, tc.orphans, "h", func(string) bool { return tc.backoff })
			if !slices.Equal(p.create, tc.wantCreate) || !slices.Equal(names(p.remove), tc.wantRemove) {
				t.Errorf("create %v remove %v; want create %v remove %v", p.create, names(p.remove), tc.wantCreate, tc.wantRemove)
			}
		})
	}
}

func TestRollingUpdate(t *testing.T) {
	maxUnavailable := func(v intstr.IntOrString) *appsv1.DaemonSet {
		return newDS(func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v })
	}
	surge := newDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}
	})
	old := func(n string, m ...func(*corev1.Pod)) *corev1.Pod { return pod("old-"+n, n, "h0", m...) }
	cur := func(n string, m ...func(*corev1.Pod)) *corev1.Pod { return pod("cur-"+n, n, "h", m...) }
	three := []nodeState{state("a", true, true, old("a", ready)), state("b", true, true, old("b", ready)), state("c", true, true, old("c", ready))}
	for _, tc := range []struct {
		name       string
		ds         *appsv1.DaemonSet
		nodes      []nodeState
		wantCreate []string
		wantRemove []string
	}{
		{name: "maxUnavailable 1 deletes one old pod", ds: newDS(), nodes: three, wantRemove: []string{"old-a"}},
		{name: "maxUnavailable 2", ds: maxUnavailable(intstr.FromInt32(2)), nodes: three, wantRemove: []string{"old-a", "old-b"}},
		{name: "maxUnavailable 50% of 3 rounds up to 2", ds: maxUnavailable(intstr.FromString("50%")), nodes: three, wantRemove: []string{"old-a", "old-b"}},
		{name: "budget spent by a node without pod", ds: newDS(),
			nodes: []nodeState{state("a", true, true), state("b", true, true, old("b", ready))}},
		{name: "budget spent by an unready new pod", ds: newDS(),
			nodes: []nodeState{state("a", true, true, cur("a")), state("b", true, true, old("b", ready))}},
		{name: "budget spent by a terminating old pod", ds: newDS(),
			nodes: []nodeState{state("a", true, true, old("a", ready, deleting)), state("b", true, true, old("b", ready))}},
		{name: "unavailable old pods go regardless of budget", ds: newDS(),
			nodes:      []nodeState{state("a", true, true, cur("a")), state("b", true, true, old("b")), state("c", true, true, old("c", ready))},
			wantRemove: []string{"old-b"}},
		{name: "up to date", ds: newDS(), nodes: []nodeState{state("a", true, true, cur("a", ready))}},
		{name: "surge creates beside an available old pod", ds: surge, nodes: three, wantCreate: []string{"a"}},
		{name: "surge: old pod deleted once the new one is available", ds: surge,
			nodes:      []nodeState{state("a", true, true, old("a", ready), cur("a", ready)), state("b", true, true, old("b", ready))},
			wantRemove: []string{"old-a"}, wantCreate: []string{"b"}},
		{name: "surge budget in use", ds: surge,
			nodes: []nodeState{state("a", true, true, old("a", ready), cur("a")), state("b", true, true, old("b", ready))}},
		{name: "surge replaces an unavailable old pod at once", ds: surge,
			nodes:      []nodeState{state("a", true, true, old("a", ready), cur("a")), state("b", true, true, old("b"))},
			wantCreate: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rollingUpdate(tc.ds, tc.nodes, "h", now)
			if !slices.Equal(p.create, tc.wantCreate) || !slices.Equal(names(p.remove), tc.wantRemove) {
				t.Errorf("create %v remove %v; want create %v remove %v", p.create, names(p.remove), tc.wantCreate, tc.wantRemove)
			}
		})
	}
}

func TestCalculateStatus(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 120 })
	nodes := []nodeState{
		state("a", true, true, pod("a", "a", "h", ready)), // ready for a minute: not yet available
		state("b", true, true, pod("b", "b", "h0", ready, func(p *corev1.Pod) {
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
		})),
		state("c", true, true),
		state("d", false, false, pod("d", "d", "h")),
		state("e", false, false),
	}
	st := calculateStatus(ds, nodes, "h", now)
	want := appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberMisscheduled: 1, NumberReady: 2,
		NumberAvailable: 1, UpdatedNumberScheduled: 1, NumberUnavailable: 2, ObservedGeneration: 2}
	if st.DesiredNumberScheduled != want.DesiredNumberScheduled || st.CurrentNumberScheduled != want.CurrentNumberScheduled ||
		st.NumberMisscheduled != want.NumberMisscheduled || st.NumberReady != want.NumberReady || st.NumberAvailable != want.NumberAvailable ||
		st.UpdatedNumberScheduled != want.UpdatedNumberScheduled || st.NumberUnavailable != want.NumberUnavailable || st.ObservedGeneration != want.ObservedGeneration {
		t.Errorf("status = %+v\nwant     %+v", st, want)
	}
}
