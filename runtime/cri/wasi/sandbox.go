package wasi

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunPodSandbox creates a ready isolation group. There is no network namespace: the
// sandbox reports no IP, like a hostNetwork pod.
func (s *Server) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config metadata.name is required")
	}
	rec := sandboxRecord{
		ID:             newID(),
		Name:           md.GetName(),
		UID:            md.GetUid(),
		Namespace:      md.GetNamespace(),
		Attempt:        md.GetAttempt(),
		Hostname:       cfg.GetHostname(),
		LogDirectory:   cfg.GetLogDirectory(),
		Labels:         cloneMap(cfg.GetLabels()),
		Annotations:    cloneMap(cfg.GetAnnotations()),
		RuntimeHandler: req.GetRuntimeHandler(),
		DNSServers:     cfg.GetDnsConfig().GetServers(),
		DNSSearches:    cfg.GetDnsConfig().GetSearches(),
		DNSOptions:     cfg.GetDnsConfig().GetOptions(),
		Ready:          true,
		CreatedAt:      nowNano(),
	}
	if rec.LogDirectory != "" {
		if err := os.MkdirAll(rec.LogDirectory, 0o755); err != nil {
			return nil, status.Errorf(codes.Internal, "create sandbox log directory: %v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := sandboxNameKey(&rec)
	if other, ok := s.names[key]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "sandbox name %q is reserved for %q", key, other)
	}
	if err := writeJSON(s.sandboxPath(rec.ID), &rec); err != nil {
		return nil, status.Errorf(codes.Internal, "persist sandbox: %v", err)
	}
	s.sandboxes[rec.ID] = &sandbox{rec: rec}
	indexAdd(s.sandboxesByPod, rec.Labels, rec.ID)
	s.names[key] = rec.ID
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: rec.ID}, nil
}

// StopPodSandbox kills the sandbox's running containers and marks it not ready. Stopping an
// unknown sandbox is not an error (the kubelet retries after restarts).
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	s.mu.Lock()
	_, sb, err := lookupID(s.sandboxes, req.GetPodSandboxId())
	if err != nil {
		s.mu.Unlock()
		if err == errNotFound {
			return &runtimeapi.StopPodSandboxResponse{}, nil
		}
		return nil, grpcErr("sandbox", req.GetPodSandboxId(), err)
	}
	ids := slices.Clone(sb.containers)
	s.mu.Unlock()
	for _, id := range ids {
		if err := s.stopContainer(ctx, id); err != nil && err != errNotFound {
			return nil, grpcErr("container", id, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.rec.Ready {
		sb.rec.Ready = false
		if err := writeJSON(s.sandboxPath(sb.rec.ID), &sb.rec); err != nil {
			return nil, status.Errorf(codes.Internal, "persist sandbox: %v", err)
		}
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox kills and removes the sandbox's containers, then the sandbox. It is
// idempotent.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s.mu.Lock()
	id, sb, err := lookupID(s.sandboxes, req.GetPodSandboxId())
	if err != nil {
		s.mu.Unlock()
		if err == errNotFound {
			return &runtimeapi.RemovePodSandboxResponse{}, nil
		}
		return nil, grpcErr("sandbox", req.GetPodSandboxId(), err)
	}
	ids := slices.Clone(sb.containers)
	s.mu.Unlock()
	for _, cid := range ids {
		if err := s.removeContainer(ctx, cid); err != nil && err != errNotFound {
			return nil, grpcErr("container", cid, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sandboxes[id]; !ok {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err := os.Remove(s.sandboxPath(id)); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "remove sandbox record: %v", err)
	}
	delete(s.sandboxes, id)
	indexRemove(s.sandboxesByPod, sb.rec.Labels, id)
	delete(s.names, sandboxNameKey(&sb.rec))
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (s *Server) sandboxStatusLocked(sb *sandbox) *runtimeapi.PodSandboxStatus {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if sb.rec.Ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandboxStatus{
		Id:             sb.rec.ID,
		Metadata:       sandboxMetadata(&sb.rec),
		State:          st,
		CreatedAt:      sb.rec.CreatedAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{}, // no pod network: no IP
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}}},
		Labels:         cloneMap(sb.rec.Labels),
		Annotations:    cloneMap(sb.rec.Annotations),
		RuntimeHandler: sb.rec.RuntimeHandler,
	}
}

func sandboxMetadata(r *sandboxRecord) *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: r.Name, Uid: r.UID, Namespace: r.Namespace, Attempt: r.Attempt}
}

// PodSandboxStatus implements the CRI.
func (s *Server) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, sb, err := lookupID(s.sandboxes, req.GetPodSandboxId())
	if err != nil {
		return nil, grpcErr("sandbox", req.GetPodSandboxId(), err)
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: s.sandboxStatusLocked(sb), Timestamp: nowNano()}
	for _, cid := range sb.containers {
		if c, ok := s.containers[cid]; ok {
			resp.ContainersStatuses = append(resp.ContainersStatuses, s.containerStatusLocked(c))
		}
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"logDirectory":%q,"containers":%d,"network":"none (host-style, no IP)"}`, sb.rec.LogDirectory, len(sb.containers))}
	}
	return resp, nil
}

func (s *Server) listSandboxesLocked(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	var out []*runtimeapi.PodSandbox
	for _, id := range candidates(s.sandboxes, s.sandboxesByPod, f.GetLabelSelector()) {
		sb := s.sandboxes[id]
		if f != nil {
			if f.GetId() != "" && !strings.HasPrefix(id, f.GetId()) {
				continue
			}
			if f.GetState() != nil && f.GetState().GetState() != s.sandboxStatusLocked(sb).State {
				continue
			}
			if !matchLabels(sb.rec.Labels, f.GetLabelSelector()) {
				continue
			}
		}
		st := s.sandboxStatusLocked(sb)
		out = append(out, &runtimeapi.PodSandbox{
			Id: id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: st.Labels, Annotations: st.Annotations, RuntimeHandler: st.RuntimeHandler,
		})
	}
	slices.SortFunc(out, func(a, b *runtimeapi.PodSandbox) int { return cmpInt64(a.CreatedAt, b.CreatedAt) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ListPodSandbox lists sandboxes matching the filter (id prefix, state, label selector).
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ListPodSandboxResponse{Items: s.listSandboxesLocked(req.GetFilter())}, nil
}

// streamChunk is how many items a Stream* response carries.
const streamChunk = 500

// StreamPodSandboxes sends the ListPodSandbox result in chunks.
func (s *Server) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	s.mu.Lock()
	items := s.listSandboxesLocked(req.GetFilter())
	s.mu.Unlock()
	return sendChunks(items, "sandboxes", func(chunk []*runtimeapi.PodSandbox) error {
		return stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: chunk})
	})
}

// sendChunks sends items streamChunk at a time.
func sendChunks[T any](items []T, what string, send func([]T) error) error {
	for chunk := range slices.Chunk(items, streamChunk) {
		if err := send(chunk); err != nil {
			return fmt.Errorf("send %s: %w", what, err)
		}
	}
	return nil
}
