package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Back-off defaults, Kubernetes' crash-loop back-off.
const (
	DefaultBackOffBase = 10 * time.Second
	DefaultBackOffMax  = 5 * time.Minute
	// minimumGracePeriod is the least time a container gets to stop, as in the kubelet.
	minimumGracePeriod = 2
)

// Waiting reasons the kubelet reports for containers it could not start.
const (
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
	ReasonErrImagePull      = "ErrImagePull"
	ReasonCreateContainer   = "CreateContainerError"
	ReasonRunContainerError = "RunContainerError"
	ReasonCreateSandbox     = "CreatePodSandboxError"
)

// ContainerError is why a container could not be started in the last sync.
type ContainerError struct {
	// Reason is the waiting reason (CrashLoopBackOff, ErrImagePull, …).
	Reason string
	// Message is shown with it.
	Message string
}

// SyncResult is what one SyncPod did.
type SyncResult struct {
	// Errors by container name; a container started cleanly has no entry.
	Errors map[string]ContainerError
	// Started names the containers started.
	Started []string
	// RequeueAfter, when > 0, asks for another sync once a back-off ends.
	RequeueAfter time.Duration
	// Err is a pod-level failure (sandbox creation, runtime unreachable).
	Err error
}

// Config configures a Manager.
type Config struct {
	// Runtime and Images are the CRI services.
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	// LogRoot is where pod log directories are created.
	LogRoot string
	// BackOffBase and BackOffMax bound crash-loop back-off (defaults 10 s and 5 min).
	BackOffBase, BackOffMax time.Duration
	// BackOff overrides the back-off (tests use a fake clock).
	BackOff *flowcontrol.Backoff
	// NodeName and NodeIP feed the downward-API environment.
	NodeName, NodeIP string
	// RuntimeHandler is passed to RunPodSandbox.
	RuntimeHandler string
	// Logger receives logs.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Manager runs pods on a CRI runtime.
type Manager struct {
	cfg      Config
	recorder record.EventRecorder
	backoff  *flowcontrol.Backoff
	log      *slog.Logger
	now      func() time.Time
	// The back-off keeps its own lock; mu guards nothing else but makes the intent clear
	// that backoff bookkeeping across Get/Next is atomic per container.
	mu sync.Mutex
}

// NewManager returns a Manager.
func NewManager(cfg Config) *Manager {
	if cfg.BackOffBase <= 0 {
		cfg.BackOffBase = DefaultBackOffBase
	}
	if cfg.BackOffMax <= 0 {
		cfg.BackOffMax = DefaultBackOffMax
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The runtime is another process (containerd) with its own working directory: the
	// log directories it is given must not be relative.
	if abs, err := filepath.Abs(cfg.LogRoot); err == nil && cfg.LogRoot != "" {
		cfg.LogRoot = abs
	}
	b := cfg.BackOff
	if b == nil {
		// The entry resets after 2 × max (10 min) without a restart: Kubernetes' rule.
		b = flowcontrol.NewBackOff(cfg.BackOffBase, cfg.BackOffMax)
	}
	return &Manager{cfg: cfg, backoff: b, log: cfg.Logger, now: cfg.Now}
}

// Runtime is the CRI runtime service.
func (m *Manager) Runtime() cri.RuntimeService { return m.cfg.Runtime }

// GetPodStatus reads one pod's sandboxes and containers from the runtime.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*PodStatus, error) {
	st := &PodStatus{UID: uid, Name: name, Namespace: namespace}
	sel := map[string]string{LabelPodUID: string(uid)}
	sbs, err := m.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes of pod %s/%s: %w", namespace, name, err)
	}
	for _, sb := range sbs {
		s := &SandboxStatus{ID: sb.GetId(), Ready: sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY,
			Attempt: sb.GetMetadata().GetAttempt(), CreatedAt: fromNanos(sb.GetCreatedAt())}
		if s.Ready {
			if resp, err := m.cfg.Runtime.PodSandboxStatus(ctx, sb.GetId(), false); err == nil {
				s.IP = resp.GetStatus().GetNetwork().GetIp()
			}
		}
		st.Sandboxes = append(st.Sandboxes, s)
	}
	cts, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing containers of pod %s/%s: %w", namespace, name, err)
	}
	for _, ct := range cts {
		resp, err := m.cfg.Runtime.ContainerStatus(ctx, ct.GetId(), false)
		if err != nil || resp.GetStatus() == nil {
			// Removed between list and status: the next sync sees the truth.
			c := containerFromList(ct)
			st.Containers = append(st.Containers, c)
			continue
		}
		c := containerFromCRI(resp.GetStatus())
		if c.Image == "" {
			c.Image = ct.GetImage().GetImage()
		}
		st.Containers = append(st.Containers, c)
	}
	st.SortNewestFirst()
	return st, nil
}

// SyncPod brings the pod's runtime state towards its spec (the seven steps).
func (m *Manager) SyncPod(ctx context.Context, pod *corev1.Pod, st *PodStatus, health Health) SyncResult {
	res := SyncResult{Errors: map[string]ContainerError{}}
	a := ComputePodActions(pod, st, health)
	log := m.log.With("pod", pod.Namespace+"/"+pod.Name)
	// 1. Kill the pod if its sandbox changed (or everything is done).
	if a.KillPod {
		if err := m.KillPod(ctx, pod, st, nil); err != nil {
			res.Err = err
			return res
		}
		if !a.CreateSandbox {
			return res
		}
	} else {
		// 2. Kill the containers that must go.
		m.killContainers(ctx, pod, a.ContainersToKill)
	}
	// 3. Create the sandbox.
	sandboxID := a.SandboxID
	sbConfig := m.sandboxConfig(pod, a.Attempt)
	if a.CreateSandbox {
		if err := os.MkdirAll(sbConfig.LogDirectory, 0o755); err != nil {
			res.Err = fmt.Errorf("creating pod log directory: %w", err)
			return res
		}
		id, err := m.cfg.Runtime.RunPodSandbox(ctx, sbConfig, m.cfg.RuntimeHandler)
		if err != nil {
			if m.recorder != nil {
				m.recorder.Eventf(pod, corev1.EventTypeWarning, EventSandboxFailed, "Failed to create pod sandbox: %v", err)
			}
			res.Err = fmt.Errorf("%s: %w", ReasonCreateSandbox, err)
			return res
		}
		log.Debug("created sandbox", "id", id, "attempt", a.Attempt)
		sandboxID = id
	}
	podIP := m.cfg.NodeIP
	if resp, err := m.cfg.Runtime.PodSandboxStatus(ctx, sandboxID, false); err == nil && resp.GetStatus().GetNetwork().GetIp() != "" {
		podIP = resp.GetStatus().GetNetwork().GetIp()
	}
	start := func(c *corev1.Container, typ string) {
		wait, err := m.startContainer(ctx, pod, st, sandboxID, sbConfig, c, typ, podIP)
		if err != nil {
			res.Errors[c.Name] = *err
			if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
				res.RequeueAfter = wait
			}
			return
		}
		res.Started = append(res.Started, c.Name)
	}
	// 4. Ephemeral containers.
	for _, i := range a.EphemeralContainersToStart {
		// Validation allows an ephemeral container only the fields a container has that
		// make sense for it, so it starts as that container would.
		c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		start(&c, ContainerTypeEphemeral)
	}
	// 5. The next init container; the rest wait until it has completed.
	if a.InitContainerToStart >= 0 {
		start(&pod.Spec.InitContainers[a.InitContainerToStart], ContainerTypeInit)
		return res
	}
	// 6. Regular containers.
	for _, i := range a.ContainersToStart {
		start(&pod.Spec.Containers[i], ContainerTypeRegular)
	}
	return res
}

func backoffKey(pod *corev1.Pod, name string) string {
	return string(pod.UID) + "/" + name
}

// startContainer starts one container unless it is in crash-loop back-off; on back-off it
// returns the time left.
func (m *Manager) startContainer(ctx context.Context, pod *corev1.Pod, st *PodStatus, sandboxID string,
	sbConfig *runtimeapi.PodSandboxConfig, c *corev1.Container, typ, podIP string) (time.Duration, *ContainerError) {
	restartCount := 0
	if prev := st.Latest(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
		if prev.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			finished := prev.FinishedAt
			if finished.IsZero() {
				finished = m.now()
			}
			key := backoffKey(pod, c.Name)
			m.mu.Lock()
			if m.backoff.IsInBackOffSince(key, finished) {
				d := m.backoff.Get(key)
				m.mu.Unlock()
				left := d - m.now().Sub(finished)
				if left < 10*time.Millisecond {
					left = 10 * time.Millisecond
				}
				m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
				return left, &ContainerError{Reason: ReasonCrashLoopBackOff,
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, c.Name, pod.Name, pod.Namespace, pod.UID)}
			}
			m.backoff.Next(key, finished)
			m.mu.Unlock()
		}
	}
	imageRef, cerr := m.ensureImage(ctx, pod, c, typ, sbConfig)
	if cerr != nil {
		return 0, cerr
	}
	cfg := m.containerConfig(pod, c, typ, restartCount, imageRef, podIP)
	if typ == ContainerTypeEphemeral {
		if cerr := targetNamespace(cfg, pod, st, c.Name); cerr != nil {
			m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventFailed, "Error: %s", cerr.Message)
			return 0, cerr
		}
	}
	id, err := m.cfg.Runtime.CreateContainer(ctx, sandboxID, cfg, sbConfig)
	if err != nil {
		m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventFailed, "Error: %v", err)
		return 0, &ContainerError{Reason: ReasonCreateContainer, Message: err.Error()}
	}
	m.event(pod, c.Name, typ, corev1.EventTypeNormal, EventCreated, "Created container: %s", c.Name)
	if err := m.cfg.Runtime.StartContainer(ctx, id); err != nil {
		m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventFailed, "Error: %v", err)
		return 0, &ContainerError{Reason: ReasonRunContainerError, Message: err.Error()}
	}
	m.event(pod, c.Name, typ, corev1.EventTypeNormal, EventStarted, "Started container %s", c.Name)
	m.log.Debug("started container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "id", id, "restartCount", restartCount)
	m.pruneExited(ctx, st, c.Name)
	return 0, nil
}

// pruneExited removes the exited instances of a container older than the one just
// replaced, keeping one previous instance for `logs --previous` (the kubelet's GC keeps
// one dead container per name).
func (m *Manager) pruneExited(ctx context.Context, st *PodStatus, name string) {
	seen := 0
	for _, c := range st.Containers {
		if c.Name != name {
			continue
		}
		seen++
		if seen > 1 && c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if err := m.cfg.Runtime.RemoveContainer(ctx, c.ID); err != nil {
				m.log.Debug("removing old container", "id", c.ID, "err", err)
			}
		}
	}
}

func (m *Manager) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, typ string, sb *runtimeapi.PodSandboxConfig) (string, *ContainerError) {
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	if m.cfg.Images == nil {
		return c.Image, nil
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		resp, err := m.cfg.Images.ImageStatus(ctx, spec, false)
		if err == nil && resp.GetImage() != nil {
			m.event(pod, c.Name, typ, corev1.EventTypeNormal, EventPulled, "Container image %q already present on machine", c.Image)
			if id := resp.GetImage().GetId(); id != "" {
				return id, nil
			}
			return c.Image, nil
		}
		if c.ImagePullPolicy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventNeverPull, "%s", msg)
			return "", &ContainerError{Reason: "ErrImageNeverPull", Message: msg}
		}
	}
	m.event(pod, c.Name, typ, corev1.EventTypeNormal, EventPulling, "Pulling image %q", c.Image)
	began := m.now()
	ref, err := m.cfg.Images.PullImage(ctx, spec, nil, sb)
	if err != nil {
		m.event(pod, c.Name, typ, corev1.EventTypeWarning, EventFailed, "Failed to pull image %q: %v", c.Image, err)
		return "", &ContainerError{Reason: ReasonErrImagePull, Message: err.Error()}
	}
	m.event(pod, c.Name, typ, corev1.EventTypeNormal, EventPulled, "Successfully pulled image %q in %s", c.Image, m.now().Sub(began).Round(time.Millisecond))
	if ref == "" {
		ref = c.Image
	}
	return ref, nil
}

func podLabels(pod *corev1.Pod) map[string]string {
	l := map[string]string{}
	maps.Copy(l, pod.Labels)
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

func (m *Manager) sandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		LogDirectory: PodLogDir(m.cfg.LogRoot, pod.Namespace, pod.Name, pod.UID),
		Labels:       podLabels(pod),
		Annotations:  maps.Clone(pod.Annotations),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: namespaceOptions(pod)}},
	}
	if pod.Spec.HostNetwork {
		// A host-network pod shares the node's UTS namespace too (containerd and CRI-O join
		// it), so it has the node's hostname: setting one makes runc refuse the sandbox
		// ("unable to set hostname without a private UTS namespace"). The kubelet leaves
		// it empty for the same reason.
		return cfg
	}
	cfg.Hostname = pod.Name
	if pod.Spec.Hostname != "" {
		cfg.Hostname = pod.Spec.Hostname
	}
	return cfg
}

// namespaceOptions are the Linux namespaces of a pod's sandbox and containers, as the
// kubelet chooses them: the node's network, PID and IPC namespaces when the pod asks for
// them; otherwise one network and IPC namespace per pod, and a PID namespace per
// container unless shareProcessNamespace. The zero value of the CRI field is POD, so a
// runtime that honours it (containerd) would otherwise put every container in the
// sandbox's PID namespace.
func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER,
		Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

func (m *Manager) containerConfig(pod *corev1.Pod, c *corev1.Container, typ string, restartCount int, imageRef, podIP string) *runtimeapi.ContainerConfig {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	labels := map[string]string{LabelPodName: pod.Name, LabelPodNamespace: pod.Namespace, LabelPodUID: string(pod.UID), LabelContainerName: c.Name}
	envs := m.envs(pod, c, podIP)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    expandAll(c.Command, envs),
		Args:       expandAll(c.Args, envs),
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Labels:     labels,
		Annotations: map[string]string{
			AnnotationContainerHash: HashContainer(c), AnnotationRestartCount: strconv.Itoa(restartCount),
			AnnotationGracePeriod: strconv.FormatInt(grace, 10), AnnotationContainerType: typ,
		},
		LogPath: ContainerLogPath(c.Name, restartCount),
		Stdin:   c.Stdin, StdinOnce: c.StdinOnce, Tty: c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{Resources: linuxResources(c),
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}},
	}
	return cfg
}

// targetNamespace puts an ephemeral container with a targetContainerName into its
// target's process namespace, as the kubelet does: CRI's TARGET mode with the target's
// container id, when the pod does not share one namespace between all its containers
// anyway. A runtime without process namespaces (the built-in WASI one) ignores it.
func targetNamespace(cfg *runtimeapi.ContainerConfig, pod *corev1.Pod, st *PodStatus, name string) *ContainerError {
	var target string
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			target = ec.TargetContainerName
		}
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if target == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return nil
	}
	cs := st.Latest(target)
	if cs == nil {
		return &ContainerError{Reason: ReasonCreateContainer, Message: fmt.Sprintf("target container %q of ephemeral container %q has not been created", target, name)}
	}
	ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, cs.ID
	return nil
}

// linuxResources maps limits to CRI, as the kubelet does for cgroups: memory limit in
// bytes, CPU quota over a 100 ms period and shares from the request.
func linuxResources(c *corev1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		r.CpuPeriod = 100000
		r.CpuQuota = q.MilliValue() * 100000 / 1000
	}
	shares := int64(2)
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		shares = max(q.MilliValue()*1024/1000, 2)
	}
	r.CpuShares = shares
	return r
}

// envs resolves literal values and the downward-API fields that need no volume.
func (m *Manager) envs(pod *corev1.Pod, c *corev1.Container, podIP string) []*runtimeapi.KeyValue {
	var out []*runtimeapi.KeyValue
	vals := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = pod.Name
			case "metadata.namespace":
				v = pod.Namespace
			case "metadata.uid":
				v = string(pod.UID)
			case "spec.nodeName":
				v = pod.Spec.NodeName
			case "spec.serviceAccountName":
				v = pod.Spec.ServiceAccountName
			case "status.podIP", "status.hostIP":
				v = podIP
			default:
				v = subscriptedField(pod, e.ValueFrom.FieldRef.FieldPath)
			}
		} else {
			v = expand(v, vals)
		}
		vals[e.Name] = v
		out = append(out, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(v)})
	}
	return out
}

// subscriptedField resolves metadata.annotations['key'] and metadata.labels['key'],
// the downward-API paths a Job's indexed pods read their completion index through.
func subscriptedField(pod *corev1.Pod, path string) string {
	for prefix, m := range map[string]map[string]string{"metadata.annotations": pod.Annotations, "metadata.labels": pod.Labels} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key]
			}
		}
	}
	return ""
}

func expandAll(in []string, envs []*runtimeapi.KeyValue) []string {
	if len(in) == 0 {
		return nil
	}
	vals := map[string]string{}
	for _, e := range envs {
		vals[e.Key] = string(e.Value)
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vals)
	}
	return out
}

// expand replaces $(VAR) references, leaving unknown ones and $$(VAR) escapes as
// Kubernetes does.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
					name := s[i+2 : i+2+j]
					if v, ok := vals[name]; ok {
						b.WriteString(v)
					} else {
						b.WriteString(s[i : i+3+j])
					}
					i += 2 + j
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// gracePeriod picks the stop timeout: the deletion's grace, else the pod's.
func gracePeriod(pod *corev1.Pod, override *int64) int64 {
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	switch {
	case override != nil:
		g = *override
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return g
}

func (m *Manager) killContainers(ctx context.Context, pod *corev1.Pod, kill map[string]KillInfo) {
	grace := max(gracePeriod(pod, nil), minimumGracePeriod)
	var wg sync.WaitGroup
	for id, info := range kill {
		wg.Go(func() {
			m.log.Info("killing container", "pod", pod.Namespace+"/"+pod.Name, "container", info.Name, "reason", info.Reason, "message", info.Message)
			msg := "Stopping container " + info.Name
			switch {
			case strings.HasSuffix(info.Message, "will be restarted"):
				msg = info.Message
			case info.Message != "":
				msg = info.Message + ", will be restarted"
			}
			m.event(pod, info.Name, containerType(pod, info.Name), corev1.EventTypeNormal, EventKilling, "%s", msg)
			if err := m.cfg.Runtime.StopContainer(ctx, id, grace); err != nil {
				m.log.Warn("stopping container", "id", id, "err", err)
			}
		})
	}
	wg.Wait()
}

// KillPod stops every running container (in parallel, with the grace period) and then
// every sandbox of the pod; grace overrides the pod's when non-nil.
func (m *Manager) KillPod(ctx context.Context, pod *corev1.Pod, st *PodStatus, grace *int64) error {
	g := gracePeriod(pod, grace)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, c := range st.Containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING && c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		wg.Go(func() {
			if err := m.cfg.Runtime.StopContainer(ctx, c.ID, g); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stopping container %s: %w", c.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, sb := range st.Sandboxes {
		if !sb.Ready {
			continue
		}
		if err := m.cfg.Runtime.StopPodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.ID, err))
		}
	}
	return errors.Join(errs...)
}

// RemovePod removes every sandbox (and with them the containers) and the log directory
// of a pod that is gone from the API.
func (m *Manager) RemovePod(ctx context.Context, st *PodStatus) error {
	var errs []error
	for _, c := range st.Containers {
		if err := m.cfg.Runtime.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID, err))
		}
	}
	for _, sb := range st.Sandboxes {
		if err := m.cfg.Runtime.RemovePodSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.ID, err))
		}
	}
	m.mu.Lock()
	m.backoff.GC()
	m.mu.Unlock()
	if st.Name != "" {
		if err := os.RemoveAll(PodLogDir(m.cfg.LogRoot, st.Namespace, st.Name, st.UID)); err != nil {
			errs = append(errs, fmt.Errorf("removing pod logs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RuntimePod is a pod found in the runtime, for housekeeping.
type RuntimePod struct {
	// UID, Name and Namespace come from the sandbox labels.
	UID             types.UID
	Name, Namespace string
}

// ListPods lists the pods that have sandboxes in the runtime.
func (m *Manager) ListPods(ctx context.Context) ([]RuntimePod, error) {
	sbs, err := m.cfg.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	seen := map[types.UID]bool{}
	var out []RuntimePod
	for _, sb := range sbs {
		uid := types.UID(sb.GetLabels()[LabelPodUID])
		if uid == "" {
			uid = types.UID(sb.GetMetadata().GetUid())
		}
		if uid == "" || seen[uid] {
			continue
		}
		seen[uid] = true
		out = append(out, RuntimePod{UID: uid, Name: sb.GetMetadata().GetName(), Namespace: sb.GetMetadata().GetNamespace()})
	}
	return out, nil
}

// LogDir is the pod log root.
func (m *Manager) LogDir() string { return m.cfg.LogRoot }

// PreviousLogPath is the log file of the instance before c (restartCount-1) in the same
// directory, which outlives the container itself.
func PreviousLogPath(c *ContainerStatus) string {
	if c == nil || c.LogPath == "" || c.RestartCount == 0 {
		return ""
	}
	return filepath.Join(filepath.Dir(c.LogPath), strconv.Itoa(c.RestartCount-1)+".log")
}
