package kuberuntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// The reasons of the events the kubelet records about containers, as Kubernetes' kubelet
// names them (pkg/kubelet/events), so that `kubectl describe pod` and `kubectl events`
// read the same.
const (
	EventPulling       = "Pulling"
	EventPulled        = "Pulled"
	EventFailed        = "Failed"
	EventNeverPull     = "ErrImageNeverPull"
	EventCreated       = "Created"
	EventStarted       = "Started"
	EventKilling       = "Killing"
	EventBackOff       = "BackOff"
	EventSandboxFailed = "FailedCreatePodSandBox"
)

// ContainerRef is the reference events about a container of a pod carry: the pod, with
// the container's place in its spec as the field path.
func ContainerRef(pod *corev1.Pod, name, typ string) *corev1.ObjectReference {
	list := "containers"
	switch typ {
	case ContainerTypeInit:
		list = "initContainers"
	case ContainerTypeEphemeral:
		list = "ephemeralContainers"
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: fmt.Sprintf("spec.%s{%s}", list, name)}
}

// containerType is the type of a container of pod by name (regular when unknown).
func containerType(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return ContainerTypeInit
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return ContainerTypeEphemeral
		}
	}
	return ContainerTypeRegular
}

// event records an event about a container when the manager has a recorder.
func (m *Manager) event(pod *corev1.Pod, name, typ, eventType, reason, format string, args ...any) {
	if m.recorder == nil {
		return
	}
	m.recorder.Eventf(ContainerRef(pod, name, typ), eventType, reason, format, args...)
}

// SetRecorder makes the manager record events with r from now on; the kubelet sets it
// when it starts, before any pod is synced.
func (m *Manager) SetRecorder(r record.EventRecorder) { m.recorder = r }
