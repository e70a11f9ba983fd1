package status

import (
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet/kuberuntime"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var now = time.Unix(2_000_000, 0)

func pod(policy corev1.RestartPolicy, inits []string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: corev1.PodSpec{RestartPolicy: policy}}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, Image: n})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: n})
	}
	return p
}

func run(name string, restarts int) *kuberuntime.ContainerStatus {
	return &kuberuntime.ContainerStatus{ID: name + "-" + string(rune('0'+restarts)), Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		StartedAt: now, RestartCount: restarts}
}

func exit(name string, code int32, restarts int) *kuberuntime.ContainerStatus {
	return &kuberuntime.ContainerStatus{ID: name + "-x" + string(rune('0'+restarts)), Name: name, State: runtimeapi.ContainerState_CONTAINER_EXITED,
		ExitCode: code, StartedAt: now, FinishedAt: now, RestartCount: restarts}
}

func conds(st corev1.PodStatus) map[corev1.PodConditionType]corev1.ConditionStatus {
	m := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		m[c.Type] = c.Status
	}
	return m
}

func TestGeneratePodStatus(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	tests := []struct {
		name       string
		pod        *corev1.Pod
		ctrs       []*kuberuntime.ContainerStatus
		noSandbox  bool
		errors     map[string]kuberuntime.ContainerError
		phase      corev1.PodPhase
		initd, rdy corev1.ConditionStatus
		waiting    string // reason of the first container's waiting state
		terminated string // reason of the first container's terminated state
	}{
		{name: "nothing yet", pod: pod(corev1.RestartPolicyAlways, nil, "a"), noSandbox: true, phase: corev1.PodPending, initd: T, rdy: F, waiting: "ContainerCreating"},
		{name: "init running", pod: pod(corev1.RestartPolicyAlways, []string{"i"}, "a"), ctrs: []*kuberuntime.ContainerStatus{run("i", 0)},
			phase: corev1.PodPending, initd: F, rdy: F, waiting: "PodInitializing"},
		{name: "init failed, Never", pod: pod(corev1.RestartPolicyNever, []string{"i"}, "a"), ctrs: []*kuberuntime.ContainerStatus{exit("i", 1, 0)},
			phase: corev1.PodFailed, initd: F, rdy: F, waiting: "PodInitializing"},
		{name: "all running", pod: pod(corev1.RestartPolicyAlways, []string{"i"}, "a"), ctrs: []*kuberuntime.ContainerStatus{run("a", 0), exit("i", 0, 0)},
			phase: corev1.PodRunning, initd: T, rdy: T},
		{name: "one running one done, OnFailure", pod: pod(corev1.RestartPolicyOnFailure, nil, "a", "b"), ctrs: []*kuberuntime.ContainerStatus{exit("a", 0, 0), run("b", 0)},
			phase: corev1.PodRunning, initd: T, rdy: F, terminated: "Completed"},
		{name: "all succeeded, Never", pod: pod(corev1.RestartPolicyNever, nil, "a", "b"), ctrs: []*kuberuntime.ContainerStatus{exit("a", 0, 0), exit("b", 0, 0)},
			phase: corev1.PodSucceeded, initd: T, rdy: F, terminated: "Completed"},
		{name: "one failed, Never", pod: pod(corev1.RestartPolicyNever, nil, "a", "b"), ctrs: []*kuberuntime.ContainerStatus{exit("a", 2, 0), exit("b", 0, 0)},
			phase: corev1.PodFailed, initd: T, rdy: F, terminated: "Error"},
		{name: "failed, OnFailure keeps running", pod: pod(corev1.RestartPolicyOnFailure, nil, "a"), ctrs: []*kuberuntime.ContainerStatus{exit("a", 2, 0)},
			phase: corev1.PodRunning, initd: T, rdy: F, terminated: "Error"},
		{name: "crash loop", pod: pod(corev1.RestartPolicyAlways, nil, "a"), ctrs: []*kuberuntime.ContainerStatus{exit("a", 1, 3), exit("a", 1, 2)},
			errors: map[string]kuberuntime.ContainerError{"a": {Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
			phase:  corev1.PodRunning, initd: T, rdy: F, waiting: "CrashLoopBackOff"},
		{name: "image pull error", pod: pod(corev1.RestartPolicyAlways, nil, "a"), errors: map[string]kuberuntime.ContainerError{"a": {Reason: "ErrImagePull"}},
			phase: corev1.PodPending, initd: T, rdy: F, waiting: "ErrImagePull"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &kuberuntime.PodStatus{UID: "u", Containers: tc.ctrs}
			if !tc.noSandbox {
				rt.Sandboxes = []*kuberuntime.SandboxStatus{{ID: "sb", Ready: true}}
			}
			st := GeneratePodStatus(Input{Pod: tc.pod, Runtime: rt, Errors: tc.errors, HostIP: "10.0.0.1", RuntimeName: "wasi", Now: now})
			if st.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tc.phase)
			}
			c := conds(st)
			if c[corev1.PodInitialized] != tc.initd || c[corev1.PodReady] != tc.rdy || c[corev1.ContainersReady] != tc.rdy || c[corev1.PodScheduled] != T {
				t.Errorf("conditions = %v", c)
			}
			if (c[corev1.PodReadyToStartContainers] == T) == tc.noSandbox {
				t.Errorf("PodReadyToStartContainers = %s", c[corev1.PodReadyToStartContainers])
			}
			cs := st.ContainerStatuses[0]
			if tc.waiting != "" && (cs.State.Waiting == nil || cs.State.Waiting.Reason != tc.waiting) {
				t.Errorf("state = %+v, want waiting %s", cs.State, tc.waiting)
			}
			if tc.terminated != "" && (cs.State.Terminated == nil || cs.State.Terminated.Reason != tc.terminated) {
				t.Errorf("state = %+v, want terminated %s", cs.State, tc.terminated)
			}
			if !tc.noSandbox && (st.PodIP != "10.0.0.1" || st.HostIP != "10.0.0.1") {
				t.Errorf("ips = %s %s", st.PodIP, st.HostIP)
			}
		})
	}
}

func TestCrashLoopStatusCarriesLastState(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways, nil, "a")
	rt := &kuberuntime.PodStatus{Sandboxes: []*kuberuntime.SandboxStatus{{ID: "sb", Ready: true}}, Containers: []*kuberuntime.ContainerStatus{exit("a", 1, 3), exit("a", 1, 2)}}
	st := GeneratePodStatus(Input{Pod: p, Runtime: rt, Errors: map[string]kuberuntime.ContainerError{"a": {Reason: "CrashLoopBackOff"}}, RuntimeName: "wasi", Now: now})
	cs := st.ContainerStatuses[0]
	if cs.RestartCount != 3 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 || cs.ContainerID != "wasi://a-x3" {
		t.Fatalf("status = %+v", cs)
	}
}

func TestProbesGateReadiness(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways, nil, "a")
	rt := &kuberuntime.PodStatus{Sandboxes: []*kuberuntime.SandboxStatus{{ID: "sb", Ready: true}}, Containers: []*kuberuntime.ContainerStatus{run("a", 0)}}
	for _, tc := range []struct {
		ready, known   bool
		started, sknwn bool
		want           bool
	}{{true, true, true, true, true}, {false, true, true, true, false}, {false, false, true, true, false}, {true, true, false, true, false}, {true, true, false, false, false}} {
		in := Input{Pod: p, Runtime: rt, RuntimeName: "wasi", Now: now,
			HasReadiness: func(string) bool { return true }, HasStartup: func(string) bool { return true },
			Ready: func(string) (bool, bool) { return tc.ready, tc.known }, Started: func(string) (bool, bool) { return tc.started, tc.sknwn }}
		st := GeneratePodStatus(in)
		if st.ContainerStatuses[0].Ready != tc.want || (conds(st)[corev1.PodReady] == corev1.ConditionTrue) != tc.want {
			t.Errorf("%+v: ready = %v", tc, st.ContainerStatuses[0].Ready)
		}
		if *st.ContainerStatuses[0].Started != (tc.started && tc.sknwn) {
			t.Errorf("%+v: started = %v", tc, *st.ContainerStatuses[0].Started)
		}
	}
}

func TestTransitionTimesKept(t *testing.T) {
	p := pod(corev1.RestartPolicyAlways, nil, "a")
	rt := &kuberuntime.PodStatus{Sandboxes: []*kuberuntime.SandboxStatus{{ID: "sb", Ready: true}}, Containers: []*kuberuntime.ContainerStatus{run("a", 0)}}
	first := GeneratePodStatus(Input{Pod: p, Runtime: rt, RuntimeName: "wasi", Now: now})
	p.Status = first
	second := GeneratePodStatus(Input{Pod: p, Runtime: rt, RuntimeName: "wasi", Now: now.Add(time.Hour)})
	if string(canonical(&first)) != string(canonical(&second)) {
		t.Fatalf("status changed without a change:\n%s\n%s", canonical(&first), canonical(&second))
	}
}
