// Package testserver starts wasmplane for the integration and kubectl tests: an
// in-process server in a temporary directory, clients for it, and binaries built once per
// test binary.
package testserver

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/examples/workloads"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Server is an in-process wasmplane with the directory and port it was started on, so that
// a restart can reuse both.
type Server struct {
	*server.Instance
	DataDir string
	Port    int
}

// Start runs the whole control plane (controllers and scheduler included) in a fresh
// t.TempDir() on a free port; it stops when the test ends. opts adjust the configuration
// before the server starts.
func Start(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	return start(t, t.TempDir(), 0, false, opts...)
}

// StartAPI is Start without controllers and scheduler, so that nothing but the test
// writes objects (a controller updating a Deployment would race a test's own update).
// opts adjust the configuration before the server starts.
func StartAPI(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	return start(t, t.TempDir(), 0, true, opts...)
}

// StartAt runs an API-only server (see StartAPI) on dataDir and port (0 = a free one). A
// port just released by a previous instance may briefly still be busy, so binding is
// retried until a deadline.
func StartAt(t testing.TB, dataDir string, port int) *Server {
	t.Helper()
	return start(t, dataDir, port, true)
}

func start(t testing.TB, dataDir string, port int, apiOnly bool, opts ...func(*server.Config)) *Server {
	t.Helper()
	var inst *server.Instance
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		cfg := server.Config{DataDir: dataDir, Port: port, Logger: Logger(), DisableControllers: apiOnly, DisableScheduler: apiOnly}
		for _, o := range opts {
			o(&cfg)
		}
		inst, err = server.Start(context.Background(), cfg)
		if err != nil {
			t.Logf("starting wasmplane (will retry): %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("starting wasmplane on %s port %d: %v", dataDir, port, err)
	}
	s := &Server{Instance: inst, DataDir: dataDir, Port: PortOf(t, inst.URL())}
	t.Cleanup(inst.Close)
	return s
}

// Restart stops s and starts a new server on the same data directory and port.
func (s *Server) Restart(t testing.TB) *Server {
	t.Helper()
	s.Close()
	return StartAt(t, s.DataDir, s.Port)
}

// Logger keeps the server quiet unless WASMPLANE_TEST_LOG is set: test output should show
// failures, not routine server logs.
func Logger() *slog.Logger {
	if os.Getenv("WASMPLANE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// PortOf returns the port of a base URL.
func PortOf(t testing.TB, base string) int {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing %q: %v", base, err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("port of %q: %v", base, err)
	}
	return p
}

// KubeconfigConfig loads the admin kubeconfig a server wrote in dataDir (servers started
// as separate processes); json as for Config.
func KubeconfigConfig(t testing.TB, dataDir string, json bool) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatalf("loading the admin kubeconfig: %v", err)
	}
	return tune(cfg, json)
}

func tune(cfg *rest.Config, json bool) *rest.Config {
	cfg.QPS, cfg.Timeout = -1, 30*time.Second
	if json {
		cfg.ContentType = runtime.ContentTypeJSON
		cfg.AcceptContentTypes = runtime.ContentTypeJSON
	}
	return cfg
}

// HTTPClient is a raw HTTP client carrying the admin credentials of s.
func (s *Server) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(s.RESTConfig())
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	return c
}

// Config returns an unthrottled admin config for s carrying its credentials; json forces
// JSON instead of the protobuf client-go negotiates for built-in types by default.
func (s *Server) Config(json bool) *rest.Config { return tune(s.RESTConfig(), json) }

// Clientset is a typed clientset for s (see Config for json).
func (s *Server) Clientset(t testing.TB, json bool) kubernetes.Interface {
	t.Helper()
	return NewClientset(t, s.Config(json))
}

// NewClientset builds a clientset or fails the test.
func NewClientset(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// EtcdClient connects to the etcd behind s; it is closed when the test ends.
func (s *Server) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.EtcdEndpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Build compiles the main package pkg (an import path of this module) into dir and returns
// the binary's path. Call it from TestMain so that a test binary builds each tool once.
func Build(dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// RunWithBinary builds pkg once into a temporary directory, stores the binary's path in
// *bin, runs the package's tests and removes the directory; TestMain passes the result to
// os.Exit.
func RunWithBinary(m *testing.M, pkg string, bin *string) int {
	return RunWithBinaries(m, map[string]*string{pkg: bin})
}

// RunWithBinaries is RunWithBinary for several tools: each package of bins (import path
// to where its binary's path goes) is built once, one after the other, before the tests.
func RunWithBinaries(m *testing.M, bins map[string]*string) int {
	return RunWithWorkloads(m, nil, bins)
}

// RunWithWorkloads is RunWithBinaries that first builds the example WASI workloads
// (examples/workloads) into *modules, when modules is not nil.
func RunWithWorkloads(m *testing.M, modules *map[string]string, bins map[string]*string) int {
	flag.Parse()
	if testing.Short() && len(bins) > 0 {
		// Linking wasmplane, kubectl or helm takes minutes on a small machine, and the tests
		// that drive them are the slow end-to-end ones: -short leaves the package out.
		fmt.Println("-short: skipped (these tests run binaries built for them)")
		return 0
	}
	dir, err := os.MkdirTemp("", "wasmplane-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if modules != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if *modules, err = workloads.Build(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for pkg, bin := range bins {
		if *bin, err = Build(dir, pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// upLine is what `wasmplane up` prints once it serves.
var upLine = regexp.MustCompile(`wasmplane is up at (https://\S+)`)

// UpURLs reads a `wasmplane up` process's stdout to its end and sends the URL it prints
// when it serves (once; the channel has room for it, so the reader never blocks).
func UpURLs(stdout io.Reader) <-chan string {
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := upLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return urls
}

// Do sends one raw request as the admin, asking for JSON, and returns the status, header
// and body.
func (s *Server) Do(t testing.TB, ctx context.Context, method, path, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return resp.StatusCode, resp.Header, data
}

// ReportLatencies reports the p50 and p99 of lat (sorted in place) in microseconds, the
// figures the benchmarks of docs/performance.md quote.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
