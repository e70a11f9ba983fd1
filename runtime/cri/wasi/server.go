// Package wasi is wasmplane's built-in container runtime: a CRI v1 gRPC server whose
// containers are WASI (wasip1) modules run by wazero. Pod sandboxes are isolation groups
// without a network namespace; a container's image is a module from the local image store
// (package images); its stdout and stderr go to CRI log files (package crilog).
//
// See docs/cri-conformance.md for the choices this runtime makes where WASI and the CRI do
// not line up (filesystem, signals, exit codes, exec).
package wasi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/runtime/cri/images"
	"github.com/wasmplane/wasmplane/runtime/cri/streaming"
)

// Runtime identity reported by Version.
const (
	RuntimeName       = "wasmplane-wasi"
	RuntimeVersion    = "0.1.0"
	RuntimeAPIVersion = "v1"
)

// DefaultMemoryLimit caps a guest's linear memory when the container sets no limit.
const DefaultMemoryLimit = 256 << 20

// maxMessageSize matches the kubelet's CRI client limit so large lists pass.
const maxMessageSize = 16 << 20

// Config configures Serve.
type Config struct {
	Socket  string       // unix socket path to listen on
	RootDir string       // images, sandboxes, container scratch dirs, state
	Logger  *slog.Logger // nil = discarded
	// MaxRunningContainers bounds the containers (and execs) running guest code at once,
	// so that spinning guests leave the node agent a P; 0 means GOMAXPROCS − 1, at least 1.
	MaxRunningContainers int
}

// Server is a running CRI server.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	log    *slog.Logger
	root   string
	socket string
	images *images.Store

	grpc *grpc.Server
	lis  net.Listener

	rt    wazero.Runtime
	cache wazero.CompilationCache

	// ctx is cancelled by Close; every guest runs under a child of it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // guests and the gRPC serve loop

	// gate bounds the guests running guest code at once (gate.go).
	gate *gate

	compileMu sync.Mutex
	compiled  map[string]*compiledModule // by image id

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	// byPod indexes sandbox and container ids by their pod-UID label: the kubelet reads
	// every pod's status with lists filtered by it, which scanned every container.
	sandboxesByPod, containersByPod map[string][]string
	names                           map[string]string // reserved sandbox/container names -> id
	subs                            map[int]chan *runtimeapi.ContainerEventResponse
	nextSub                         int
	closed                          bool

	// streams serves the URLs Exec returns, on loopback.
	streams *streaming.Server

	closeOnce sync.Once
	closeErr  error
}

type sandbox struct {
	rec        sandboxRecord
	containers []string
}

// Serve starts the CRI server on cfg.Socket and returns once it is listening. ctx bounds
// the start only; the server runs until Close.
func Serve(ctx context.Context, cfg Config) (*Server, error) {
	return serve(ctx, cfg, "")
}

// serve is Serve with the compilation cache directory chosen by the caller ("" means
// RootDir/compilation-cache); tests share one cache so each module compiles once per run.
func serve(ctx context.Context, cfg Config, cacheDir string) (*Server, error) {
	if cfg.Socket == "" {
		return nil, errors.New("wasi: Config.Socket is required")
	}
	if cfg.RootDir == "" {
		return nil, errors.New("wasi: Config.RootDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sock, err := filepath.Abs(strings.TrimPrefix(cfg.Socket, "unix://"))
	if err != nil {
		return nil, fmt.Errorf("wasi: socket path: %w", err)
	}
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("wasi: root dir: %w", err)
	}
	store, err := images.Open(filepath.Join(root, "images"))
	if err != nil {
		return nil, fmt.Errorf("wasi: %w", err)
	}
	if cacheDir == "" {
		cacheDir = filepath.Join(root, "compilation-cache")
	}
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("wasi: compilation cache: %w", err)
	}
	// The runtime-wide limit is the wasm32 maximum; each container's own limit is enforced by
	// its memory allocator (memory.go) so one runtime serves every limit.
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(65536)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
		log:        cfg.Logger.With("component", "cri-wasi"),
		root:       root,
		socket:     sock,
		images:     store,
		cache:      cache,
		rt:         wazero.NewRuntimeWithConfig(sctx, rc),
		ctx:        sctx,
		cancel:     cancel,
		gate:       newGate(cfg.MaxRunningContainers),
		compiled:   map[string]*compiledModule{},
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		names:      map[string]string{},

		sandboxesByPod:  map[string][]string{},
		containersByPod: map[string][]string{},
		subs:            map[int]chan *runtimeapi.ContainerEventResponse{},
	}
	fail := func(err error) (*Server, error) {
		cancel()
		_ = s.rt.Close(context.Background())
		_ = cache.Close(context.Background())
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(sctx, s.rt); err != nil {
		return fail(fmt.Errorf("wasi: instantiate WASI: %w", err))
	}
	if err := wasm.InstantiateCheckpoint(sctx, s.rt, yield); err != nil {
		return fail(fmt.Errorf("wasi: %w", err))
	}
	if err := s.load(); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return fail(fmt.Errorf("wasi: socket directory: %w", err))
	}
	// A socket file left by a previous run would make Listen fail; nobody else can be
	// serving on it if connecting fails.
	if _, err := os.Stat(sock); err == nil {
		if c, derr := net.Dial("unix", sock); derr == nil {
			c.Close()
			return fail(fmt.Errorf("wasi: %s is in use by another server", sock))
		}
		_ = os.Remove(sock)
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", sock)
	if err != nil {
		return fail(fmt.Errorf("wasi: listen on %s: %w", sock, err))
	}
	s.lis = lis
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageSize), grpc.MaxSendMsgSize(maxMessageSize))
	runtimeapi.RegisterRuntimeServiceServer(s.grpc, s)
	runtimeapi.RegisterImageServiceServer(s.grpc, s)
	sln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = lis.Close()
		return fail(fmt.Errorf("wasi: streaming listener: %w", err))
	}
	s.streams = streaming.NewServer(execRunner{s}, url.URL{Scheme: "http", Host: sln.Addr().String()}, s.log)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.streams.Serve(sctx, sln); err != nil {
			s.log.Error("streaming server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("CRI server stopped", "err", err)
		}
	}()
	s.log.Info("CRI runtime listening", "endpoint", s.Endpoint(), "root", root)
	return s, nil
}

// Endpoint returns the CRI endpoint, "unix:///abs/path.sock".
func (s *Server) Endpoint() string { return "unix://" + s.socket }

// Images returns the image store, so callers can import images in-process.
func (s *Server) Images() *images.Store { return s.images }

// Close stops serving, kills running containers (they are recorded as exited with 137),
// waits for every goroutine and releases the wazero runtime.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for id, ch := range s.subs {
			close(ch)
			delete(s.subs, id)
		}
		s.mu.Unlock()
		s.grpc.Stop()
		s.cancel()
		s.wg.Wait()
		var errs []error
		if err := s.rt.Close(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("close wazero runtime: %w", err))
		}
		if err := s.cache.Close(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("close compilation cache: %w", err))
		}
		_ = os.Remove(s.socket)
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Version implements the CRI.
func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: RuntimeAPIVersion,
	}, nil
}

// Status reports the runtime and the (host-style) network ready.
func (s *Server) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{
			Name:     "",
			Features: &runtimeapi.RuntimeHandlerFeatures{},
		}},
		Features: &runtimeapi.RuntimeFeatures{},
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"config": fmt.Sprintf(`{"root":%q,"socket":%q,"runtime":"wazero v1.12.0"}`, s.root, s.socket)}
	}
	return resp, nil
}

// UpdateRuntimeConfig accepts the pod CIDR and ignores it: there is no pod network.
func (s *Server) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RuntimeConfig reports the cgroupfs driver: guests are not in cgroups at all, and cgroupfs
// is the value that asks nothing of the kubelet's systemd integration.
func (s *Server) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS,
	}}, nil
}

// Exec returns a single-use URL on the runtime's loopback streaming server where the
// command runs, like ExecSync, as a new instance of the container's module, with the
// client's stdin, stdout and stderr.
func (s *Server) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := s.checkStream(req.GetContainerId(), req.GetTty(), "exec"); err != nil {
		return nil, err
	}
	return s.streams.GetExec(req)
}

// checkStream refuses an exec or attach (what) with a tty, which WASI does not have, or
// to a container that is not running.
func (s *Server) checkStream(id string, tty bool, what string) error {
	if tty {
		return status.Errorf(codes.InvalidArgument, "wasmplane-wasi: WASI containers have no terminal; %s without a tty (kubectl %s -i, without -t)", what, what)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, c, err := lookupID(s.containers, id)
	if err != nil {
		return grpcErr("container", id, err)
	}
	if c.proc == nil {
		return status.Errorf(codes.FailedPrecondition, "container %q is not running", c.rec.ID)
	}
	return nil
}

// PortForward is not supported: WASI preview 1 guests cannot listen on sockets.
func (s *Server) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, status.Error(codes.Unimplemented, "wasmplane-wasi: port-forward is not supported; WASI preview 1 containers have no network")
}

// ListMetricDescriptors returns no descriptors (no cAdvisor-style metrics).
func (s *Server) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics returns no metrics.
func (s *Server) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// StreamPodSandboxMetrics sends nothing.
func (s *Server) StreamPodSandboxMetrics(*runtimeapi.StreamPodSandboxMetricsRequest, grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	return nil
}

// UpdatePodSandboxResources accepts the update; pod-level resources are not enforced.
func (s *Server) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// GetContainerEvents streams container lifecycle events until the client goes away or the
// server closes. A client that falls more than 1024 events behind loses events (logged);
// the kubelet's periodic relist repairs that.
func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ch := make(chan *runtimeapi.ContainerEventResponse, 1024)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "runtime is shutting down")
	}
	id := s.nextSub
	s.nextSub++
	s.subs[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.subs[id]; ok {
			delete(s.subs, id)
			close(ch)
		}
		s.mu.Unlock()
	}()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			if err := stream.Send(ev); err != nil {
				return fmt.Errorf("send container event: %w", err)
			}
		}
	}
}

// emitLocked sends an event for container c to every subscriber. s.mu must be held.
func (s *Server) emitLocked(c *container, typ runtimeapi.ContainerEventType) {
	if len(s.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.rec.ID,
		ContainerEventType: typ,
		CreatedAt:          nowNano(),
		ContainersStatuses: []*runtimeapi.ContainerStatus{s.containerStatusLocked(c)},
	}
	if sb, ok := s.sandboxes[c.rec.SandboxID]; ok {
		ev.PodSandboxStatus = s.sandboxStatusLocked(sb)
	}
	for id, ch := range s.subs {
		select {
		case ch <- ev:
		default:
			s.log.Warn("container event subscriber is too slow; dropping event", "subscriber", id, "container", c.rec.ID)
		}
	}
}

// grpcErr maps internal errors to gRPC status errors.
func grpcErr(what, id string, err error) error {
	if errors.Is(err, errNotFound) {
		return status.Errorf(codes.NotFound, "%s %q not found", what, id)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "%s %q: %v", what, id, err)
}
