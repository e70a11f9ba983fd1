// Package status turns a pod's runtime state into its API status (phase, conditions,
// container statuses) and writes it to the API server only when it changed, as the
// kubelet's status manager does.
package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet/kuberuntime"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Input is everything GeneratePodStatus needs.
type Input struct {
	// Pod is the API object (its spec and current status).
	Pod *corev1.Pod
	// Runtime is the runtime's view of the pod; nil = nothing created yet.
	Runtime *kuberuntime.PodStatus
	// Errors are the last sync's per-container start failures (waiting reasons).
	Errors map[string]kuberuntime.ContainerError
	// Ready and Started report probe results by container id: absent = no probe
	// configured or not yet known (see Probed).
	Ready, Started func(containerID string) (value, known bool)
	// HasReadiness and HasStartup tell whether a container has such a probe.
	HasReadiness, HasStartup func(name string) bool
	// HostIP is the node's IP.
	HostIP string
	// RuntimeName prefixes container ids ("wasi://…").
	RuntimeName string
	// Now is the current time.
	Now time.Time
}

// GeneratePodStatus computes a pod's status from its runtime state.
func GeneratePodStatus(in Input) corev1.PodStatus {
	pod := in.Pod
	old := pod.Status
	st := corev1.PodStatus{QOSClass: old.QOSClass, HostIP: in.HostIP, NominatedNodeName: old.NominatedNodeName}
	if in.HostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: in.HostIP}}
	}
	rt := in.Runtime
	if rt != nil && len(rt.Sandboxes) > 0 {
		ip := rt.Sandboxes[0].IP
		if ip == "" {
			// Containers share the node's network, as host-network pods do.
			ip = in.HostIP
		}
		if ip != "" {
			st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
	}
	st.StartTime = old.StartTime
	if st.StartTime == nil {
		t := metav1.NewTime(in.Now)
		st.StartTime = &t
	}
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(in, c.Name, c.Image, true, "PodInitializing")
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	if rt != nil && !initDone {
		// Regular containers having run means initialization completed earlier.
		for _, c := range pod.Spec.Containers {
			if rt.Latest(c.Name) != nil {
				initDone = true
			}
		}
	}
	waitReason := "ContainerCreating"
	if !initDone {
		waitReason = "PodInitializing"
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st.ContainerStatuses = append(st.ContainerStatuses, containerStatus(in, c.Name, c.Image, false, waitReason))
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i]
		cs := containerStatus(in, c.Name, c.Image, false, "ContainerCreating")
		// Nothing may rely on an ephemeral container, so it is never ready, as in
		// Kubernetes; it does not count for the pod's phase or conditions either.
		cs.Ready = false
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
	}
	st.Phase = Phase(pod, st.InitContainerStatuses, st.ContainerStatuses, initDone)
	if old.Phase == corev1.PodSucceeded || old.Phase == corev1.PodFailed {
		// A terminal phase never goes back.
		st.Phase = old.Phase
	}
	st.Conditions = conditions(pod, &st, rt, initDone, in.Now)
	return st
}

func containerStatus(in Input, name, image string, isInit bool, waitReason string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: name, Image: image}
	rt := in.Runtime
	latest := rt.Latest(name)
	if latest == nil {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waitReason}
		if isInit {
			cs.State.Waiting.Reason = "PodInitializing"
		}
		if e, ok := in.Errors[name]; ok {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: e.Reason, Message: e.Message}
		}
		// Keep the count and last state the API shows across a kubelet that lost its
		// containers (e.g. the runtime was reset).
		for _, o := range append(append([]corev1.ContainerStatus{}, in.Pod.Status.InitContainerStatuses...), in.Pod.Status.ContainerStatuses...) {
			if o.Name == name {
				cs.RestartCount = o.RestartCount
				cs.LastTerminationState = o.LastTerminationState
			}
		}
		return cs
	}
	cs.ContainerID = containerID(in.RuntimeName, latest.ID)
	cs.ImageID = latest.ImageRef
	if latest.Image != "" {
		cs.Image = latest.Image
	}
	if cs.Image == "" {
		cs.Image = image
	}
	cs.RestartCount = int32(latest.RestartCount)
	cs.State = state(latest)
	if prev := rt.Previous(name); prev != nil && prev.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.LastTerminationState = state(prev)
	}
	if latest.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		if e, ok := in.Errors[name]; ok {
			// The container waits to be restarted: its last run becomes the last state.
			cs.LastTerminationState = cs.State
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: e.Reason, Message: e.Message}}
		}
	}
	if latest.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		started := true
		if in.HasStartup != nil && in.HasStartup(name) {
			v, known := false, false
			if in.Started != nil {
				v, known = in.Started(latest.ID)
			}
			started = known && v
		}
		cs.Started = &started
		ready := started
		if ready && in.HasReadiness != nil && in.HasReadiness(name) {
			v, known := false, false
			if in.Ready != nil {
				v, known = in.Ready(latest.ID)
			}
			ready = known && v
		}
		// Init containers are never ready, as in Kubernetes.
		cs.Ready = ready && !isInit
	} else {
		f := false
		cs.Started = &f
	}
	return cs
}

func containerID(runtimeName, id string) string {
	if runtimeName == "" {
		runtimeName = "cri"
	}
	return runtimeName + "://" + id
}

// state maps a runtime container to its API state.
func state(c *kuberuntime.ContainerStatus) corev1.ContainerState {
	switch c.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := c.Reason
		if reason == "" {
			reason = "Completed"
			if c.ExitCode != 0 {
				reason = "Error"
			}
		}
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: c.ExitCode, Reason: reason, Message: c.Message, ContainerID: "",
			StartedAt: metav1.NewTime(c.StartedAt), FinishedAt: metav1.NewTime(c.FinishedAt)}}
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	default:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerStatusUnknown",
			Message: "The container could not be located when the pod was terminated"}}
	}
}

// Phase is Kubernetes' getPhase: from the init and regular container states and the
// restart policy.
func Phase(pod *corev1.Pod, inits, containers []corev1.ContainerStatus, initDone bool) corev1.PodPhase {
	policy := pod.Spec.RestartPolicy
	if !initDone {
		for _, cs := range inits {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && policy == corev1.RestartPolicyNever {
				return corev1.PodFailed
			}
			if w := cs.State.Waiting; w != nil && cs.LastTerminationState.Terminated != nil &&
				cs.LastTerminationState.Terminated.ExitCode != 0 && policy == corev1.RestartPolicyNever {
				return corev1.PodFailed
			}
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range containers {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		if policy == corev1.RestartPolicyAlways {
			// Restarting containers keep the pod running.
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if policy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning
	default:
		return corev1.PodPending
	}
}

func conditions(pod *corev1.Pod, st *corev1.PodStatus, rt *kuberuntime.PodStatus, initDone bool, now time.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	set := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
			reason, msg = "", ""
		}
		out = append(out, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg})
	}
	sandboxReady := rt != nil && len(rt.Sandboxes) > 0 && rt.Sandboxes[0].Ready
	set(corev1.PodReadyToStartContainers, sandboxReady, "", "")
	initMsg := ""
	if !initDone {
		var names []string
		for _, cs := range st.InitContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
				names = append(names, cs.Name)
			}
		}
		initMsg = fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(names, " "))
	}
	set(corev1.PodInitialized, initDone, "ContainersNotInitialized", initMsg)
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	var notReady []string
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	ready := len(notReady) == 0 && !terminal
	reason, msg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if terminal {
		reason, msg = "PodCompleted", ""
	}
	set(corev1.ContainersReady, ready, reason, msg)
	gatesOK := true
	var missing []string
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				found = true
			}
		}
		if !found {
			gatesOK = false
			missing = append(missing, string(g.ConditionType))
		}
	}
	rreason, rmsg := reason, msg
	if ready && !gatesOK {
		rreason, rmsg = "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", strings.Join(missing, ","))
	}
	set(corev1.PodReady, ready && gatesOK, rreason, rmsg)
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = c
		}
	}
	out = append(out, scheduled)
	// Keep conditions other components own (readiness gates, DisruptionTarget, …).
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled:
		default:
			out = append(out, c)
		}
	}
	// Transition times change only with the status.
	for i := range out {
		out[i].LastTransitionTime = metav1.NewTime(now)
		for _, c := range pod.Status.Conditions {
			if c.Type == out[i].Type && c.Status == out[i].Status && !c.LastTransitionTime.IsZero() {
				out[i].LastTransitionTime = c.LastTransitionTime
			}
		}
		if out[i].Type == corev1.PodScheduled {
			continue
		}
		out[i].LastTransitionTime = metav1.NewTime(out[i].LastTransitionTime.Rfc3339Copy().Time)
	}
	return out
}
