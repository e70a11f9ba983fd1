package wasi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/runtime/cri/streaming"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecSync runs the command as a NEW instance of the container's module (WASI has no way
// to enter a running instance): argv is the exec's command, with the container's scratch
// directory, mounts, environment and memory limit. cmd[0] is argv[0] as usual, so a
// multi-call module dispatches on it or on argv[1].
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec command is empty")
	}
	s.mu.Lock()
	if s.closed { // Close is waiting on s.wg: no new work may join it
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "runtime is shutting down")
	}
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		s.mu.Unlock()
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	if c.proc == nil {
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.rec.ID)
	}
	rec := c.rec
	s.wg.Add(1) // Close waits for execs like for guests
	s.mu.Unlock()
	defer s.wg.Done()
	out, errOut, code, err := s.execSync(ctx, rec, req.GetCmd(), time.Duration(req.GetTimeout())*time.Second)
	switch {
	case errors.Is(err, errExecTimeout):
		return nil, status.Errorf(codes.DeadlineExceeded, "command %q timed out after %ds", req.GetCmd(), req.GetTimeout())
	case err != nil:
		return nil, status.Errorf(codes.Unknown, "exec in container %q: %v", c.rec.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: out, Stderr: errOut, ExitCode: code}, nil
}

func (s *Server) containerStatsLocked(c *container) *runtimeapi.ContainerStats {
	now := nowNano()
	st := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.rec.ID,
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.rec.Name, Attempt: c.rec.Attempt},
			Labels:      cloneMap(c.rec.Labels),
			Annotations: cloneMap(c.rec.Annotations),
		},
		Cpu: &runtimeapi.CpuUsage{Timestamp: now},
	}
	var size uint64
	if c.proc != nil {
		size = c.proc.mem.size.Load()
		if cpuAccounting {
			st.Cpu.UsageCoreNanoSeconds = &runtimeapi.UInt64Value{Value: c.proc.cpu.usage()}
		}
	}
	st.Memory = &runtimeapi.MemoryUsage{
		Timestamp:       now,
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: size},
		UsageBytes:      &runtimeapi.UInt64Value{Value: size},
		RssBytes:        &runtimeapi.UInt64Value{Value: size},
	}
	if c.proc != nil {
		if l := c.proc.mem.limit.Load(); l > size {
			st.Memory.AvailableBytes = &runtimeapi.UInt64Value{Value: l - size}
		}
	}
	return st
}

// ContainerStats reports the guest's CPU time (its thread's CPU clock) and its linear
// memory size as its working set: what the guest can touch, all of it its own (compiled
// code is shared by every instance of an image, as a container's shared libraries are
// not its working set).
func (s *Server) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := lookupID(s.containers, req.GetContainerId())
	if err != nil {
		return nil, grpcErr("container", req.GetContainerId(), err)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.containerStatsLocked(c)}, nil
}

func (s *Server) listStatsLocked(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	var out []*runtimeapi.ContainerStats
	for _, ct := range s.listContainersLocked(&runtimeapi.ContainerFilter{
		Id: f.GetId(), PodSandboxId: f.GetPodSandboxId(), LabelSelector: f.GetLabelSelector(),
	}) {
		out = append(out, s.containerStatsLocked(s.containers[ct.Id]))
	}
	return out
}

// ListContainerStats implements the CRI.
func (s *Server) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ListContainerStatsResponse{Stats: s.listStatsLocked(req.GetFilter())}, nil
}

// StreamContainerStats sends the ListContainerStats result in one chunk per 500.
func (s *Server) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	s.mu.Lock()
	items := s.listStatsLocked(req.GetFilter())
	s.mu.Unlock()
	return sendChunks(items, "container stats", func(chunk []*runtimeapi.ContainerStats) error {
		return stream.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: chunk})
	})
}

func (s *Server) podStatsLocked(sb *sandbox) *runtimeapi.PodSandboxStats {
	var mem, cpu uint64
	var cs []*runtimeapi.ContainerStats
	for _, id := range sb.containers {
		if c, ok := s.containers[id]; ok {
			st := s.containerStatsLocked(c)
			mem += st.Memory.WorkingSetBytes.Value
			cpu += st.Cpu.UsageCoreNanoSeconds.GetValue()
			cs = append(cs, st)
		}
	}
	now := nowNano()
	podCPU := &runtimeapi.CpuUsage{Timestamp: now}
	if cpuAccounting {
		// Only running guests count: an exited container's CPU time is not the pod's now,
		// as a cgroup that was removed no longer counts in its parent's usage.
		podCPU.UsageCoreNanoSeconds = &runtimeapi.UInt64Value{Value: cpu}
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id: sb.rec.ID, Metadata: sandboxMetadata(&sb.rec),
			Labels: cloneMap(sb.rec.Labels), Annotations: cloneMap(sb.rec.Annotations),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:        podCPU,
			Memory:     &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem}, UsageBytes: &runtimeapi.UInt64Value{Value: mem}},
			Containers: cs,
		},
	}
}

// PodSandboxStats sums the sandbox's container memory.
func (s *Server) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, sb, err := lookupID(s.sandboxes, req.GetPodSandboxId())
	if err != nil {
		return nil, grpcErr("sandbox", req.GetPodSandboxId(), err)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.podStatsLocked(sb)}, nil
}

// ListPodSandboxStats implements the CRI.
func (s *Server) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*runtimeapi.PodSandboxStats
	for _, p := range s.listSandboxesLocked(&runtimeapi.PodSandboxFilter{Id: req.GetFilter().GetId(), LabelSelector: req.GetFilter().GetLabelSelector()}) {
		out = append(out, s.podStatsLocked(s.sandboxes[p.Id]))
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}

// StreamPodSandboxStats sends the ListPodSandboxStats result in chunks.
func (s *Server) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	resp, err := s.ListPodSandboxStats(stream.Context(), &runtimeapi.ListPodSandboxStatsRequest{Filter: req.GetFilter()})
	if err != nil {
		return err
	}
	return sendChunks(resp.Stats, "pod sandbox stats", func(chunk []*runtimeapi.PodSandboxStats) error {
		return stream.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: chunk})
	})
}

// execRunner runs the commands of the streaming server's exec URLs.
type execRunner struct{ s *Server }

// lockRunning finds the running container id names for a streaming session; on success
// it returns with s.mu held, so that the caller can register its work before a Close.
func (s *Server) lockRunning(id string) (*container, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("runtime is shutting down")
	}
	_, c, err := lookupID(s.containers, id)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("container %q: %w", id, err)
	}
	if c.proc == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("container %q is not running", id)
	}
	return c, nil
}

// Exec implements streaming.Runtime: like ExecSync, cmd runs as a new instance of the
// container's module, here with the client's streams; the container must still run.
func (r execRunner) Exec(ctx context.Context, containerID string, cmd []string, _ bool, st streaming.Streams) error {
	s := r.s
	c, err := s.lockRunning(containerID)
	if err != nil {
		return err
	}
	rec := c.rec
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	code, err := s.runExec(ctx, rec, guestSpec{argv: cmd, stdin: st.Stdin, stdout: st.Stdout, stderr: st.Stderr}, 0)
	switch {
	case err != nil:
		return fmt.Errorf("exec in container %q: %w", containerID, err)
	case code != 0:
		return &streaming.ExitError{Code: int(code)}
	}
	return nil
}
