package kuberuntime

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func testPod(policy corev1.RestartPolicy, inits []string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: corev1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, Image: n})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: n})
	}
	return p
}

func readySandbox() []*SandboxStatus { return []*SandboxStatus{{ID: "sb", Ready: true}} }

func ctr(name string, state runtimeapi.ContainerState, exit int32) *ContainerStatus {
	return &ContainerStatus{ID: name + "-id", Name: name, State: state, ExitCode: exit}
}

func TestComputePodActions(t *testing.T) {
	always, onFailure, never := corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever
	tests := []struct {
		name      string
		pod       *corev1.Pod
		sandboxes []*SandboxStatus
		ctrs      []*ContainerStatus
		unhealthy string
		want      PodActions
	}{
		{name: "new pod creates sandbox and starts all containers", pod: testPod(always, nil, "a", "b"),
			want: PodActions{KillPod: true, CreateSandbox: true, InitContainerToStart: -1, ContainersToStart: []int{0, 1}}},
		{name: "new pod with init containers starts the first init only", pod: testPod(always, []string{"i1", "i2"}, "a"),
			want: PodActions{KillPod: true, CreateSandbox: true, InitContainerToStart: 0}},
		{name: "running init container: wait", pod: testPod(always, []string{"i1", "i2"}, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("i1", running, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1}},
		{name: "first init done: start the second", pod: testPod(always, []string{"i1", "i2"}, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("i1", exited, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: 1}},
		{name: "all init done: start regular containers", pod: testPod(always, []string{"i1", "i2"}, "a", "b"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("i2", exited, 0), ctr("i1", exited, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1, ContainersToStart: []int{0, 1}}},
		{name: "failed init restarts under OnFailure", pod: testPod(onFailure, []string{"i1"}, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("i1", exited, 2)}, want: PodActions{SandboxID: "sb", InitContainerToStart: 0}},
		{name: "failed init kills the pod under Never", pod: testPod(never, []string{"i1"}, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("i1", exited, 2)}, want: PodActions{KillPod: true, SandboxID: "sb", InitContainerToStart: -1}},
		{name: "running containers are kept", pod: testPod(always, nil, "a", "b"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", running, 0), ctr("b", running, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1}},
		{name: "Always restarts a succeeded container", pod: testPod(always, nil, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", exited, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1, ContainersToStart: []int{0}}},
		{name: "OnFailure restarts a failed container", pod: testPod(onFailure, nil, "a", "b"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", exited, 1), ctr("b", running, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1, ContainersToStart: []int{0}}},
		{name: "OnFailure leaves a succeeded container and stops the pod when all done", pod: testPod(onFailure, nil, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", exited, 0)}, want: PodActions{KillPod: true, SandboxID: "sb", InitContainerToStart: -1}},
		{name: "Never does not restart a failed container", pod: testPod(never, nil, "a", "b"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", exited, 1), ctr("b", running, 0)}, want: PodActions{SandboxID: "sb", InitContainerToStart: -1}},
		{name: "liveness failure kills and restarts under Always", pod: testPod(always, nil, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", running, 0)}, unhealthy: "a-id",
			want: PodActions{SandboxID: "sb", InitContainerToStart: -1, ContainersToStart: []int{0},
				ContainersToKill: map[string]KillInfo{"a-id": {Name: "a", Reason: "Unhealthy", Message: "Container a failed liveness probe, will be restarted"}}}},
		{name: "liveness failure under Never kills the pod", pod: testPod(never, nil, "a"), sandboxes: readySandbox(),
			ctrs: []*ContainerStatus{ctr("a", running, 0)}, unhealthy: "a-id",
			want: PodActions{KillPod: true, SandboxID: "sb", InitContainerToStart: -1,
				ContainersToKill: map[string]KillInfo{"a-id": {Name: "a", Reason: "Unhealthy", Message: "Container a failed liveness probe, will be restarted"}}}},
		{name: "dead sandbox is replaced and containers restarted", pod: testPod(always, nil, "a"),
			sandboxes: []*SandboxStatus{{ID: "old", Ready: false, Attempt: 0}}, ctrs: []*ContainerStatus{ctr("a", exited, 137)},
			want: PodActions{KillPod: true, CreateSandbox: true, SandboxID: "old", Attempt: 1, InitContainerToStart: -1, ContainersToStart: []int{0}}},
		{name: "dead sandbox of a Never pod that ran is not replaced", pod: testPod(never, nil, "a"),
			sandboxes: []*SandboxStatus{{ID: "old", Ready: false}}, ctrs: []*ContainerStatus{ctr("a", exited, 0)},
			want: PodActions{KillPod: true, SandboxID: "old", Attempt: 1, InitContainerToStart: -1}},
		{name: "dead sandbox with init containers reruns them", pod: testPod(onFailure, []string{"i"}, "a"),
			sandboxes: []*SandboxStatus{{ID: "old", Ready: false, Attempt: 2}}, ctrs: []*ContainerStatus{ctr("a", exited, 1)},
			want: PodActions{KillPod: true, CreateSandbox: true, SandboxID: "old", Attempt: 3, InitContainerToStart: 0}},
		{name: "two ready sandboxes: recreate", pod: testPod(always, nil, "a"),
			sandboxes: []*SandboxStatus{{ID: "s2", Ready: true, Attempt: 1}, {ID: "s1", Ready: true}}, ctrs: []*ContainerStatus{ctr("a", running, 0)},
			want: PodActions{KillPod: true, CreateSandbox: true, SandboxID: "s2", Attempt: 2, InitContainerToStart: -1, ContainersToStart: []int{0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &PodStatus{UID: tc.pod.UID, Sandboxes: tc.sandboxes, Containers: tc.ctrs}
			for _, c := range st.Containers {
				for i := range tc.pod.Spec.Containers {
					if tc.pod.Spec.Containers[i].Name == c.Name {
						c.Hash = HashContainer(&tc.pod.Spec.Containers[i])
					}
				}
			}
			health := func(id string) (bool, string) { return id == tc.unhealthy, "liveness" }
			got := ComputePodActions(tc.pod, st, health)
			if tc.want.ContainersToKill == nil {
				tc.want.ContainersToKill = map[string]KillInfo{}
			}
			if got.KillPod != tc.want.KillPod || got.CreateSandbox != tc.want.CreateSandbox || got.SandboxID != tc.want.SandboxID ||
				got.Attempt != tc.want.Attempt || got.InitContainerToStart != tc.want.InitContainerToStart ||
				!slices.Equal(got.ContainersToStart, tc.want.ContainersToStart) || len(got.ContainersToKill) != len(tc.want.ContainersToKill) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			for id, k := range tc.want.ContainersToKill {
				if got.ContainersToKill[id] != k {
					t.Errorf("kill %s = %+v, want %+v", id, got.ContainersToKill[id], k)
				}
			}
		})
	}
}

func TestChangedSpecRestartsContainer(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, nil, "a")
	st := &PodStatus{Sandboxes: readySandbox(), Containers: []*ContainerStatus{{ID: "a-id", Name: "a", State: running, Hash: "stale"}}}
	got := ComputePodActions(pod, st, nil)
	if k, ok := got.ContainersToKill["a-id"]; !ok || k.Reason != "Changed" || !slices.Equal(got.ContainersToStart, []int{0}) {
		t.Fatalf("got %+v", got)
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{"x": "x", "$(A)": "1", "a$(B)c": "atwoc", "$$(A)": "$(A)", "$(C)": "$(C)", "$(A": "$(A"} {
		if got := expand(in, vals); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
