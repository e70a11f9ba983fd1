// Package kuberuntime drives a CRI runtime for the kubelet: it reads a pod's sandboxes and
// containers back from the runtime, decides what has to change (computePodActions) and
// carries out Kubernetes' SyncPod steps: kill the sandbox if it changed, kill unwanted
// containers, create the sandbox, start ephemeral containers, the next init container,
// then the regular containers, with crash-loop back-off.
package kuberuntime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels and annotations the kubelet puts on CRI objects; the names are Kubernetes' so
// crictl and other tools show the same thing as on a Kubernetes node.
const (
	LabelPodName             = "io.kubernetes.pod.name"
	LabelPodNamespace        = "io.kubernetes.pod.namespace"
	LabelPodUID              = "io.kubernetes.pod.uid"
	LabelContainerName       = "io.kubernetes.container.name"
	AnnotationContainerHash  = "io.kubernetes.container.hash"
	AnnotationRestartCount   = "io.kubernetes.container.restartCount"
	AnnotationGracePeriod    = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerType  = "io.wasmplane.container.type"
	ContainerTypeInit        = "init"
	ContainerTypeRegular     = "regular"
	ContainerTypeEphemeral   = "ephemeral"
	reasonContainerCompleted = "Completed"
	reasonContainerError     = "Error"
)

// ContainerStatus is one runtime container of a pod as the kubelet sees it.
type ContainerStatus struct {
	// ID is the runtime's container id.
	ID string
	// Name is the container's name in the pod spec.
	Name string
	// Type is init, regular or ephemeral.
	Type string
	// State is the CRI state.
	State runtimeapi.ContainerState
	// CreatedAt, StartedAt and FinishedAt come from the runtime (zero when unknown).
	CreatedAt, StartedAt, FinishedAt time.Time
	// ExitCode, Reason and Message describe an exited container.
	ExitCode        int32
	Reason, Message string
	// Image is the image as the spec named it; ImageRef is the runtime's resolved id.
	Image, ImageRef string
	// Hash is the spec hash the container was created from.
	Hash string
	// RestartCount is the attempt number this container is.
	RestartCount int
	// LogPath is the absolute path of the CRI log file.
	LogPath string
}

// SandboxStatus is one runtime sandbox of a pod.
type SandboxStatus struct {
	// ID is the runtime's sandbox id.
	ID string
	// Ready is the CRI SANDBOX_READY state.
	Ready bool
	// IP is the sandbox's primary IP ("" for host-network-style sandboxes).
	IP string
	// Attempt is the sandbox metadata attempt.
	Attempt uint32
	// CreatedAt is when it was created.
	CreatedAt time.Time
}

// PodStatus is everything the runtime knows about one pod.
type PodStatus struct {
	// UID, Name and Namespace identify the pod.
	UID             types.UID
	Name, Namespace string
	// Sandboxes, newest first.
	Sandboxes []*SandboxStatus
	// Containers, newest first.
	Containers []*ContainerStatus
}

// Latest is the newest container named name, or nil.
func (s *PodStatus) Latest(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Previous is the newest container named name before Latest, or nil.
func (s *PodStatus) Previous(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	seen := false
	for _, c := range s.Containers {
		if c.Name != name {
			continue
		}
		if seen {
			return c
		}
		seen = true
	}
	return nil
}

// Running reports whether any container is running.
func (s *PodStatus) Running() bool {
	for _, c := range s.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
	}
	return false
}

// SortNewestFirst orders containers and sandboxes newest first.
func (s *PodStatus) SortNewestFirst() {
	sort.SliceStable(s.Containers, func(i, j int) bool {
		a, b := s.Containers[i], s.Containers[j]
		if a.RestartCount != b.RestartCount && a.Name == b.Name {
			return a.RestartCount > b.RestartCount
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	sort.SliceStable(s.Sandboxes, func(i, j int) bool {
		a, b := s.Sandboxes[i], s.Sandboxes[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
}

// HashContainer fingerprints the parts of a container spec whose change needs a restart.
func HashContainer(c *corev1.Container) string {
	// Only the fields that can change on a live pod (the image) and those that define the
	// process matter; hashing the whole spec would restart containers on harmless defaults.
	b, _ := json.Marshal(struct {
		Image, WorkingDir string
		Command, Args     []string
		Env               []corev1.EnvVar
	}{c.Image, c.WorkingDir, c.Command, c.Args, c.Env})
	h := fnv.New32a()
	_, _ = h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// PodLogDir is the directory of a pod's container logs under root, as Kubernetes lays
// out /var/log/pods.
func PodLogDir(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", namespace, name, uid))
}

// ContainerLogPath is a container instance's log file relative to the pod log directory.
func ContainerLogPath(container string, restartCount int) string {
	return filepath.Join(container, strconv.Itoa(restartCount)+".log")
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func containerFromCRI(st *runtimeapi.ContainerStatus) *ContainerStatus {
	c := &ContainerStatus{
		ID: st.GetId(), Name: st.GetLabels()[LabelContainerName], Type: st.GetAnnotations()[AnnotationContainerType],
		State: st.GetState(), CreatedAt: fromNanos(st.GetCreatedAt()), StartedAt: fromNanos(st.GetStartedAt()),
		FinishedAt: fromNanos(st.GetFinishedAt()), ExitCode: st.GetExitCode(), Reason: st.GetReason(), Message: st.GetMessage(),
		Image: st.GetImage().GetUserSpecifiedImage(), ImageRef: st.GetImageRef(), Hash: st.GetAnnotations()[AnnotationContainerHash],
		LogPath: st.GetLogPath(),
	}
	if c.Name == "" {
		c.Name = st.GetMetadata().GetName()
	}
	if c.Image == "" {
		c.Image = st.GetImage().GetImage()
	}
	if rc, err := strconv.Atoi(st.GetAnnotations()[AnnotationRestartCount]); err == nil {
		c.RestartCount = rc
	} else {
		c.RestartCount = int(st.GetMetadata().GetAttempt())
	}
	return c
}

func containerFromList(ct *runtimeapi.Container) *ContainerStatus {
	c := &ContainerStatus{
		ID: ct.GetId(), Name: ct.GetLabels()[LabelContainerName], Type: ct.GetAnnotations()[AnnotationContainerType],
		State: ct.GetState(), CreatedAt: fromNanos(ct.GetCreatedAt()), Image: ct.GetImage().GetUserSpecifiedImage(),
		ImageRef: ct.GetImageRef(), Hash: ct.GetAnnotations()[AnnotationContainerHash],
	}
	if c.Name == "" {
		c.Name = ct.GetMetadata().GetName()
	}
	if rc, err := strconv.Atoi(ct.GetAnnotations()[AnnotationRestartCount]); err == nil {
		c.RestartCount = rc
	} else {
		c.RestartCount = int(ct.GetMetadata().GetAttempt())
	}
	return c
}
