package kuberuntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// KillInfo says why a running container is to be killed.
type KillInfo struct {
	// Name is the container's spec name.
	Name string
	// Reason and Message are recorded as the kill's cause.
	Reason, Message string
}

// PodActions is what SyncPod must do to bring a pod's runtime state to its spec.
type PodActions struct {
	// KillPod stops every container and the sandbox.
	KillPod bool
	// CreateSandbox creates a new sandbox (after KillPod when both are set).
	CreateSandbox bool
	// SandboxID is the current ready sandbox when it is kept.
	SandboxID string
	// Attempt is the new sandbox's attempt number.
	Attempt uint32
	// InitContainerToStart indexes spec.initContainers (-1 = none); init containers run one
	// at a time, each to completion.
	InitContainerToStart int
	// ContainersToStart index spec.containers.
	ContainersToStart []int
	// ContainersToKill maps running container ids to why they go.
	ContainersToKill map[string]KillInfo
	// EphemeralContainersToStart index spec.ephemeralContainers.
	EphemeralContainersToStart []int
}

// Health tells computePodActions which running containers failed a liveness or startup
// probe; nil means every container is healthy.
type Health func(containerID string) (failed bool, probe string)

// ShouldRestart applies the restart policy to an exited container.
func ShouldRestart(policy corev1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// sandboxChanged reports whether the pod needs a new sandbox, the attempt the new one gets,
// and the id of the sandbox to keep otherwise.
func sandboxChanged(st *PodStatus) (bool, uint32, string) {
	if st == nil || len(st.Sandboxes) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range st.Sandboxes {
		if s.Ready {
			ready++
		}
	}
	latest := st.Sandboxes[0]
	if ready > 1 || !latest.Ready {
		return true, latest.Attempt + 1, latest.ID
	}
	return false, latest.Attempt, latest.ID
}

// nextInitContainer finds the init container to start next: done means all have
// completed; next < 0 with !done means one is still running; failed means next is a
// restart of a failed one.
func nextInitContainer(pod *corev1.Pod, st *PodStatus) (next int, done, failed bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return -1, true, false
	}
	// Once a regular container exists, initialization finished earlier (its init
	// containers may since have been removed).
	for _, c := range pod.Spec.Containers {
		if st.Latest(c.Name) != nil {
			return -1, true, false
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := st.Latest(inits[i].Name)
		if cs == nil {
			continue
		}
		switch cs.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			return -1, false, false
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if cs.ExitCode != 0 {
				return i, false, true
			}
			if i == len(inits)-1 {
				return -1, true, false
			}
			return i + 1, false, false
		default:
			// Created but never started, or unknown: start a fresh instance.
			return i, false, false
		}
	}
	return 0, false, false
}

// ComputePodActions compares a pod's spec with its runtime state, Kubernetes' rules.
func ComputePodActions(pod *corev1.Pod, st *PodStatus, health Health) PodActions {
	changed, attempt, sandboxID := sandboxChanged(st)
	a := PodActions{KillPod: changed, CreateSandbox: changed, SandboxID: sandboxID, Attempt: attempt,
		InitContainerToStart: -1, ContainersToKill: map[string]KillInfo{}}
	policy := pod.Spec.RestartPolicy
	if changed {
		// A pod that never restarts gets no second sandbox once it has run containers.
		if policy == corev1.RestartPolicyNever && attempt != 0 && len(st.Containers) != 0 {
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if cs := st.Latest(c.Name); cs != nil && cs.State == runtimeapi.ContainerState_CONTAINER_EXITED && !ShouldRestart(policy, cs.ExitCode) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && st != nil && len(st.Containers) != 0 {
			// Everything completed and nothing restarts: leave the pod stopped.
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) > 0 {
			a.InitContainerToStart = 0
			return a
		}
		a.ContainersToStart = toStart
		return a
	}
	for i := range pod.Spec.EphemeralContainers {
		if st.Latest(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}
	next, done, failed := nextInitContainer(pod, st)
	if !done {
		if next >= 0 {
			if failed && policy == corev1.RestartPolicyNever {
				// A failed init container fails the whole pod.
				a.KillPod = true
				return a
			}
			a.InitContainerToStart = next
		}
		return a
	}
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := st.Latest(c.Name)
		if cs == nil {
			a.ContainersToStart = append(a.ContainersToStart, i)
			continue
		}
		if cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			if cs.State != runtimeapi.ContainerState_CONTAINER_EXITED || ShouldRestart(policy, cs.ExitCode) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		var reason, msg string
		if cs.Hash != "" && cs.Hash != HashContainer(c) {
			reason, msg = "Changed", fmt.Sprintf("Container %s definition changed", c.Name)
		} else if health != nil {
			if bad, probe := health(cs.ID); bad {
				reason, msg = "Unhealthy", fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, probe)
			}
		}
		if reason == "" {
			keep++
			continue
		}
		if policy != corev1.RestartPolicyNever {
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill[cs.ID] = KillInfo{Name: c.Name, Reason: reason, Message: msg}
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
	}
	return a
}
