package wasi

import (
	"context"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/util/wait"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmplane/wasmplane/examples/workloads"
)

// modules holds the example workloads, built once per test binary.
var modules struct {
	once  sync.Once
	dir   string
	paths map[string]string
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modules.dir != "" {
		os.RemoveAll(modules.dir)
	}
	os.Exit(code)
}

// workload returns the path of a built example module.
func workload(tb testing.TB, name string) string {
	tb.Helper()
	modules.once.Do(func() {
		modules.dir, modules.err = os.MkdirTemp("", "wasmplane-workloads-")
		if modules.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		modules.paths, modules.err = workloads.Build(ctx, modules.dir)
	})
	if modules.err != nil {
		tb.Fatalf("build workloads: %v", modules.err)
	}
	p, ok := modules.paths[name]
	if !ok {
		tb.Fatalf("no workload %q", name)
	}
	return p
}

type env struct {
	s    *Server
	root string
	rt   runtimeapi.RuntimeServiceClient
	img  runtimeapi.ImageServiceClient
	logs string // sandbox log directory root
}

func testLogger(tb testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// shortTempDir returns a temp dir whose paths fit a unix socket name (108 bytes).
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "wp-cri-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startServer serves the runtime on root and connects raw CRI gRPC clients to it.
func startServer(tb testing.TB, root string) *env {
	tb.Helper()
	workload(tb, "hello") // builds the modules and the shared cache directory
	s, err := serve(context.Background(), Config{Socket: filepath.Join(root, "cri.sock"), RootDir: root, Logger: testLogger(tb)}, filepath.Join(modules.dir, "compilation-cache"))
	if err != nil {
		tb.Fatalf("Serve: %v", err)
	}
	conn, err := grpc.NewClient(s.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	e := &env{s: s, root: root, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), logs: filepath.Join(root, "pods")}
	tb.Cleanup(func() {
		conn.Close()
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return e
}

func newEnv(tb testing.TB) *env { return startServer(tb, shortTempDir(tb)) }

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// importWorkload imports an example module under name.
func (e *env) importWorkload(tb testing.TB, workloadName, name string) string {
	tb.Helper()
	im, err := e.s.Images().ImportFile(context.Background(), workload(tb, workloadName), name)
	if err != nil {
		tb.Fatalf("import %s: %v", workloadName, err)
	}
	return im.ID
}

func (e *env) runSandbox(tb testing.TB, name string, labels map[string]string) string {
	tb.Helper()
	resp, err := e.rt.RunPodSandbox(ctxT(tb), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: "uid-" + name, Namespace: "default"},
		LogDirectory: filepath.Join(e.logs, name),
		Labels:       labels,
	}})
	if err != nil {
		tb.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId
}

type ctrOpts struct {
	image    string
	command  []string
	args     []string
	envs     map[string]string
	workdir  string
	mounts   []*runtimeapi.Mount
	memory   int64
	labels   map[string]string
	readonly bool
}

func (e *env) createContainer(tb testing.TB, sandboxID, name string, o ctrOpts) string {
	tb.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: name},
		Image:      &runtimeapi.ImageSpec{Image: o.image},
		Command:    o.command,
		Args:       o.args,
		WorkingDir: o.workdir,
		Mounts:     o.mounts,
		Labels:     o.labels,
		LogPath:    name + "/0.log",
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: o.memory},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{ReadonlyRootfs: o.readonly},
		},
	}
	for k, v := range o.envs {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	resp, err := e.rt.CreateContainer(ctxT(tb), &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg})
	if err != nil {
		tb.Fatalf("CreateContainer %s: %v", name, err)
	}
	return resp.ContainerId
}

func (e *env) start(tb testing.TB, id string) {
	tb.Helper()
	if _, err := e.rt.StartContainer(ctxT(tb), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		tb.Fatalf("StartContainer: %v", err)
	}
}

func (e *env) status(tb testing.TB, id string) *runtimeapi.ContainerStatus {
	tb.Helper()
	resp, err := e.rt.ContainerStatus(ctxT(tb), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		tb.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

func (e *env) waitExited(tb testing.TB, id string) *runtimeapi.ContainerStatus {
	tb.Helper()
	var st *runtimeapi.ContainerStatus
	waitFor(tb, 30*time.Second, "container "+id+" to exit", func() bool {
		st = e.status(tb, id)
		return st.State == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	return st
}

// logLine is one parsed CRI log record.
type logLine struct {
	ts     time.Time
	stream string
	tag    string
	msg    string
}

func readCRILog(tb testing.TB, path string) []logLine {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read log: %v", err)
	}
	var out []logLine
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		parts := strings.SplitN(l, " ", 4)
		if len(parts) < 3 {
			tb.Fatalf("malformed CRI log line %q", l)
		}
		ts, err := time.Parse(time.RFC3339Nano, parts[0])
		if err != nil {
			tb.Fatalf("bad timestamp in %q: %v", l, err)
		}
		msg := ""
		if len(parts) == 4 {
			msg = parts[3]
		}
		out = append(out, logLine{ts: ts, stream: parts[1], tag: parts[2], msg: msg})
	}
	return out
}

func messages(lines []logLine, stream string) []string {
	var out []string
	for _, l := range lines {
		if l.stream == stream {
			out = append(out, l.msg)
		}
	}
	return out
}

func fmtLines(lines []logLine) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s %s\n", l.stream, l.tag, l.msg)
	}
	return b.String()
}
