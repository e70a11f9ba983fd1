package wasi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/runtime/cri/crilog"
)

type container struct {
	rec      containerRecord
	proc     *proc // non-nil while the guest runs
	starting bool  // StartContainer is instantiating the guest
}

// proc is a running guest.
type proc struct {
	cancel context.CancelFunc
	done   chan struct{}
	mem    *memoryLimiter
	cpu    cpuClock
	log    *crilog.File
	killed atomic.Bool // StopContainer/RemoveContainer asked for the kill
	attach *attachHub
}

// CreateContainer records the container, prepares its scratch directory and compiles its
// module (once per image digest).
func (s *Server) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config metadata.name is required")
	}
	if sc := cfg.GetLinux().GetSecurityContext(); sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		// Same validation as other runtimes; WASI has no users, so the ids are otherwise ignored.
		return nil, status.Error(codes.InvalidArgument, "run_as_group is set without run_as_user or run_as_username")
	}
	ref := cfg.GetImage().GetImage()
	img, err := s.images.Resolve(ref)
	if err != nil {
		return nil, notInStore(ref)
	}
	if _, err := s.compile(img.ID); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "compile image %q: %v", ref, err)
	}
	display := cfg.GetImage().GetUserSpecifiedImage()
	if display == "" {
		display = ref
		if strings.HasPrefix(ref, "sha256:") && len(img.RepoTags) > 0 {
			display = img.RepoTags[0]
		}
	}
	imageRef := img.ID
	if d := img.RepoDigests(); len(d) > 0 {
		imageRef = d[0]
	}
	rec := containerRecord{
		ID:           newID(),
		SandboxID:    req.GetPodSandboxId(),
		Name:         md.GetName(),
		Attempt:      md.GetAttempt(),
		Image:        display,
		ImageRef:     imageRef,
		Command:      slices.Clone(cfg.GetCommand()),
		Args:         slices.Clone(cfg.GetArgs()),
		WorkingDir:   cfg.GetWorkingDir(),
		Labels:       cloneMap(cfg.GetLabels()),
		Annotations:  cloneMap(cfg.GetAnnotations()),
		LogPath:      cfg.GetLogPath(),
		MemoryLimit:  cfg.GetLinux().GetResources().GetMemoryLimitInBytes(),
		ReadonlyRoot: cfg.GetLinux().GetSecurityContext().GetReadonlyRootfs(),
		Stdin:        cfg.GetStdin(),
		StdinOnce:    cfg.GetStdinOnce(),
		State:        stateCreated,
		CreatedAt:    nowNano(),
	}
	for _, kv := range cfg.GetEnvs() {
		rec.Envs = append(rec.Envs, [2]string{kv.GetKey(), string(kv.GetValue())})
	}
	for _, m := range cfg.GetMounts() {
		if m.GetContainerPath() == "" || m.GetHostPath() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "mount needs both container_path and host_path: %v", m)
		}
		rec.Mounts = append(rec.Mounts, mountRecord{ContainerPath: m.GetContainerPath(), HostPath: m.GetHostPath(), Readonly: m.GetReadonly()})
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	sid, sb, err := lookupID(s.sandboxes, req.GetPodSandboxId())
	if err != nil {
		return nil, grpcErr("sandbox", req.GetPodSandboxId(), err)
	}
	if !sb.rec.Ready {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", sid)
	}
	rec.SandboxID = sid
	key := containerNameKey(sid, rec.Name, rec.Attempt)
	if other, ok := s.names[key]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "container name %q (attempt %d) is reserved for %q", rec.Name, rec.Attempt, other)
	}
	if err := os.MkdirAll(s.scratchDir(rec.ID), 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "create scratch dir: %v", err)
	}
	if err := writeJSON(filepath.Join(s.containerDir(rec.ID), "state.json"), &rec); err != nil {
		_ = os.RemoveAll(s.containerDir(rec.ID))
		return nil, status.Errorf(codes.Internal, "persist container: %v", err)
	}
	c := &container{rec: rec}
	s.containers[rec.ID] = c
	indexAdd(s.containersByPod, rec.Labels, rec.ID)
	s.names[key] = rec.ID
	sb.containers = append(sb.containers, rec.ID)
	s.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: rec.ID}, nil
}

// StartContainer instantiates the module and runs its _start in a goroutine.
func (s *Server) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "runtime is shutting down")
	}
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		s.mu.Unlock()
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	if c.rec.State != stateCreated || c.starting {
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is %s, not CONTAINER_CREATED", c.rec.ID, c.rec.State)
	}
	sb := s.sandboxes[c.rec.SandboxID]
	if sb == nil {
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q of container %q is gone", c.rec.SandboxID, c.rec.ID)
	}
	// Instantiation (file I/O, data segments, initial memory) runs without the lock so pods
	// start in parallel and status calls are not held up; starting keeps a second Start out.
	c.starting = true
	rec, sbRec := c.rec, sb.rec
	s.mu.Unlock()

	g, err := s.prepareGuest(rec, sbRec)

	s.mu.Lock()
	defer s.mu.Unlock()
	c.starting = false
	if s.closed || s.containers[rec.ID] != c {
		if g != nil {
			g.discard()
		}
		return nil, status.Errorf(codes.Aborted, "container %q was removed (or the runtime closed) while starting", rec.ID)
	}
	if err != nil {
		// A container that cannot start is exited with an error, as runc reports a failed exec.
		c.rec.State = stateExited
		c.rec.FinishedAt = nowNano()
		c.rec.StartedAt = c.rec.FinishedAt
		c.rec.ExitCode = 128
		c.rec.Reason = "StartError"
		c.rec.Message = err.Error()
		var oom *oomError
		if errors.As(err, &oom) {
			c.rec.ExitCode, c.rec.Reason = 137, "OOMKilled"
		}
		s.persistLocked(c)
		s.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		return nil, status.Errorf(codes.Unknown, "start container %q: %v", c.rec.ID, err)
	}
	c.proc = s.runGuestLocked(c, g)
	c.rec.State = stateRunning
	c.rec.StartedAt = nowNano()
	s.persistLocked(c)
	s.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return &runtimeapi.StartContainerResponse{}, nil
}

func (s *Server) persistLocked(c *container) {
	if err := writeJSON(filepath.Join(s.containerDir(c.rec.ID), "state.json"), &c.rec); err != nil {
		s.log.Error("persist container state", "id", c.rec.ID, "err", err)
	}
}

// finishLocked records a guest's exit. s.mu must be held.
func (s *Server) finishLocked(c *container, res exitResult, persist bool) {
	c.proc = nil
	c.rec.State = stateExited
	c.rec.FinishedAt = nowNano()
	c.rec.ExitCode = res.code
	c.rec.Reason = res.reason
	c.rec.Message = res.message
	if persist {
		s.persistLocked(c)
	}
	s.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// StopContainer kills a running guest and waits for it to finish. WASI preview 1 has no
// signals, so there is nothing to deliver SIGTERM to: the kill is immediate whatever the
// timeout (exit code 137). Stopping a stopped or unknown container is not an error.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.stopContainer(ctx, req.GetContainerId()); err != nil && err != errNotFound {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (s *Server) stopContainer(ctx context.Context, id string) error {
	s.mu.Lock()
	_, c, err := lookupID(s.containers, id)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	p := c.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	p.killed.Store(true)
	p.cancel()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for container %s to stop: %w", id, ctx.Err())
	}
}

// RemoveContainer kills the container if it runs and deletes it with its scratch directory.
// The log file stays: it belongs to the kubelet's log directory. Idempotent.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.removeContainer(ctx, req.GetContainerId()); err != nil && err != errNotFound {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (s *Server) removeContainer(ctx context.Context, id string) error {
	if err := s.stopContainer(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fullID, c, err := lookupID(s.containers, id)
	if err != nil {
		return err
	}
	if c.proc != nil || c.starting {
		return status.Errorf(codes.FailedPrecondition, "container %q is starting; retry the removal", fullID)
	}
	if err := os.RemoveAll(s.containerDir(fullID)); err != nil {
		return fmt.Errorf("remove container directory: %w", err)
	}
	delete(s.containers, fullID)
	indexRemove(s.containersByPod, c.rec.Labels, fullID)
	delete(s.names, containerNameKey(c.rec.SandboxID, c.rec.Name, c.rec.Attempt))
	if sb, ok := s.sandboxes[c.rec.SandboxID]; ok {
		sb.containers = slices.DeleteFunc(sb.containers, func(x string) bool { return x == fullID })
	}
	s.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

func (s *Server) containerStatusLocked(c *container) *runtimeapi.ContainerStatus {
	st := &runtimeapi.ContainerStatus{
		Id:          c.rec.ID,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.rec.Name, Attempt: c.rec.Attempt},
		State:       c.rec.criState(),
		CreatedAt:   c.rec.CreatedAt,
		StartedAt:   c.rec.StartedAt,
		FinishedAt:  c.rec.FinishedAt,
		ExitCode:    c.rec.ExitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.rec.Image},
		ImageRef:    c.rec.ImageRef,
		ImageId:     imageIDOf(c.rec.ImageRef),
		Reason:      c.rec.Reason,
		Message:     c.rec.Message,
		Labels:      cloneMap(c.rec.Labels),
		Annotations: cloneMap(c.rec.Annotations),
		LogPath:     s.logPathLocked(c),
		Resources: &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
			MemoryLimitInBytes: c.rec.MemoryLimit,
		}},
	}
	for _, m := range c.rec.Mounts {
		st.Mounts = append(st.Mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.Readonly})
	}
	return st
}

func imageIDOf(ref string) string {
	if _, d, ok := strings.Cut(ref, "@"); ok {
		return d
	}
	return ref
}

func (s *Server) logPathLocked(c *container) string {
	sb, ok := s.sandboxes[c.rec.SandboxID]
	if !ok || sb.rec.LogDirectory == "" || c.rec.LogPath == "" {
		return ""
	}
	return filepath.Join(sb.rec.LogDirectory, c.rec.LogPath)
}

// ContainerStatus implements the CRI.
func (s *Server) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: s.containerStatusLocked(c)}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"sandboxId":%q,"scratchDir":%q,"argv":%q}`, c.rec.SandboxID, s.scratchDir(c.rec.ID), argv(&c.rec))}
	}
	return resp, nil
}

func (s *Server) listContainersLocked(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, id := range candidates(s.containers, s.containersByPod, f.GetLabelSelector()) {
		c := s.containers[id]
		if f != nil {
			if f.GetId() != "" && !strings.HasPrefix(id, f.GetId()) {
				continue
			}
			if f.GetPodSandboxId() != "" && !strings.HasPrefix(c.rec.SandboxID, f.GetPodSandboxId()) {
				continue
			}
			if f.GetState() != nil && f.GetState().GetState() != c.rec.criState() {
				continue
			}
			if !matchLabels(c.rec.Labels, f.GetLabelSelector()) {
				continue
			}
		}
		out = append(out, &runtimeapi.Container{
			Id:           id,
			PodSandboxId: c.rec.SandboxID,
			Metadata:     &runtimeapi.ContainerMetadata{Name: c.rec.Name, Attempt: c.rec.Attempt},
			Image:        &runtimeapi.ImageSpec{Image: c.rec.Image},
			ImageRef:     c.rec.ImageRef,
			ImageId:      imageIDOf(c.rec.ImageRef),
			State:        c.rec.criState(),
			CreatedAt:    c.rec.CreatedAt,
			Labels:       cloneMap(c.rec.Labels),
			Annotations:  cloneMap(c.rec.Annotations),
		})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int { return cmpInt64(a.CreatedAt, b.CreatedAt) })
	return out
}

// ListContainers lists containers matching the filter (id and sandbox id prefixes, state,
// label selector).
func (s *Server) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: s.listContainersLocked(req.GetFilter())}, nil
}

// StreamContainers sends the ListContainers result in chunks.
func (s *Server) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	s.mu.Lock()
	items := s.listContainersLocked(req.GetFilter())
	s.mu.Unlock()
	return sendChunks(items, "containers", func(chunk []*runtimeapi.Container) error {
		return stream.Send(&runtimeapi.StreamContainersResponse{Containers: chunk})
	})
}

// UpdateContainerResources applies a new memory limit (to the running guest too: its next
// grow is checked against it); other resources have no WASI equivalent and are accepted.
func (s *Server) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	if l := req.GetLinux(); l != nil {
		c.rec.MemoryLimit = l.GetMemoryLimitInBytes()
		if c.proc != nil {
			c.proc.mem.setLimit(c.rec.MemoryLimit)
		}
		s.persistLocked(c)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog reopens a running container's log file after the kubelet rotated it.
func (s *Server) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	if c.proc == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.rec.ID)
	}
	if err := c.proc.log.Reopen(); err != nil {
		return nil, status.Errorf(codes.Internal, "reopen log: %v", err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// notInStore is the NotFound error for a reference the local store does not hold.
func notInStore(ref string) error {
	return status.Errorf(codes.NotFound, "image %q not found in the local store; import it with `wasmplane image import FILE.wasm --name %s` or pull file:///abs/path.wasm", ref, ref)
}
