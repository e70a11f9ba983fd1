package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/examples/workloads"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Plugin packages of examples/plugins/go the tests install.
const (
	tokenAuthenticator  = "examples/plugins/go/token-authenticator"
	labelInjector       = "examples/plugins/go/label-injector"
	requireLabels       = "examples/plugins/go/require-labels"
	podimageInitializer = "examples/plugins/go/podimage-initializer"
)

// buildCache builds WASI workloads and plugin modules once per test binary, on first use,
// into one temporary directory that TestMain removes.
type buildCache struct {
	mu      sync.Mutex
	dir     string
	dirErr  error
	wlOnce  sync.Once
	wl      map[string]string
	wlErr   error
	plugins map[string]*pluginBuild
}

type pluginBuild struct {
	once sync.Once
	path string
	err  error
}

func (b *buildCache) tempDir(t testing.TB) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" && b.dirErr == nil {
		b.dir, b.dirErr = os.MkdirTemp("", "wasmplane-e2e-")
	}
	if b.dirErr != nil {
		t.Fatalf("e2e build dir: %v", b.dirErr)
	}
	return b.dir
}

func (b *buildCache) cleanup() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// workload returns the path of the WASI program examples/workloads/<name>.
func (b *buildCache) workload(t testing.TB, name string) string {
	t.Helper()
	dir := b.tempDir(t)
	b.wlOnce.Do(func() {
		out := filepath.Join(dir, "workloads")
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.wlErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.wl, b.wlErr = workloads.Build(ctx, out)
	})
	if b.wlErr != nil {
		t.Fatalf("building the workloads: %v", b.wlErr)
	}
	p, ok := b.wl[name]
	if !ok {
		t.Fatalf("no workload %q", name)
	}
	return p
}

// plugin returns the path of a plugin module built from pkg (relative to the module
// root) exactly as `wasmplane plugin build` does; unstripped keeps the symbol tables, which
// yields a module with the same behaviour and a different digest (a "new version").
func (b *buildCache) plugin(t testing.TB, pkg string, unstripped bool) string {
	t.Helper()
	p, err := b.buildPlugin(b.tempDir(t), wasmtest.ModuleRoot(t), pkg, unstripped)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pluginsFor builds several plugin modules in parallel (each still once per binary) and
// returns their paths by package.
func (b *buildCache) pluginsFor(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	dir, root := b.tempDir(t), wasmtest.ModuleRoot(t)
	paths := make([]string, len(pkgs))
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = b.buildPlugin(dir, root, pkg, false)
		}()
	}
	wg.Wait()
	out := map[string]string{}
	for i, pkg := range pkgs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		out[pkg] = paths[i]
	}
	return out
}

func (b *buildCache) buildPlugin(dir, root, pkg string, unstripped bool) (string, error) {
	key := pkg
	if unstripped {
		key += "+unstripped"
	}
	b.mu.Lock()
	if b.plugins == nil {
		b.plugins = map[string]*pluginBuild{}
	}
	e := b.plugins[key]
	if e == nil {
		e = &pluginBuild{}
		b.plugins[key] = e
	}
	b.mu.Unlock()
	e.once.Do(func() {
		out := filepath.Join(dir, strings.NewReplacer("/", "_", "+", "_").Replace(key)+".wasm")
		args := toolchain.GoArgs(out, "./"+pkg)
		if unstripped {
			args = slicesWithout(args, "-ldflags=-s -w")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), toolchain.GoEnv()...)
		if b, err := cmd.CombinedOutput(); err != nil {
			e.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
			return
		}
		e.path = out
	})
	return e.path, e.err
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, x := range s {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}

// up is a running `wasmplane up` subprocess.
type up struct {
	cmd  *exec.Cmd
	url  string
	port int
	log  string
	done chan struct{}
}

// startUp runs `wasmplane up --data-dir dir --port port --kubelet-port -1 extra…` and
// returns once it printed its URL and answers the admin; port 0 picks a free one. A port
// just released by a killed instance may be busy for a moment, so an early exit is
// retried until a deadline. The process is killed when the test ends.
func startUp(t *testing.T, dir string, port int, extra ...string) *up {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		p, err := tryStartUp(t, dir, port, attempt, extra)
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("starting wasmplane up on %s: %v", dir, err)
		}
		t.Logf("starting wasmplane up (attempt %d, will retry): %v", attempt, err)
		time.Sleep(200 * time.Millisecond)
	}
}

func tryStartUp(t *testing.T, dir string, port, attempt int, extra []string) (*up, error) {
	t.Helper()
	// Each start logs to its own file next to the data dir; a failing test shows its tail.
	logFile, err := os.CreateTemp(filepath.Dir(dir), fmt.Sprintf("up-%d-*.log", attempt))
	if err != nil {
		return nil, fmt.Errorf("creating the log file: %w", err)
	}
	logPath := logFile.Name()
	args := []string{"up", "--data-dir", dir, "--port", strconv.Itoa(port), "--kubelet-port", "-1", "--log-level", "warn"}
	cmd := exec.Command(wasmplaneBin, append(args, extra...)...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", wasmplaneBin, err)
	}
	p := &up{cmd: cmd, log: logPath, done: make(chan struct{})}
	urls := testserver.UpURLs(stdout)
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", logPath, tail(logPath, 40))
		}
	})
	select {
	case u := <-urls:
		p.url = u
		p.port = testserver.PortOf(t, u)
	case <-p.done:
		return nil, fmt.Errorf("wasmplane up exited (%v): %s", cmd.ProcessState, tail(logPath, 10))
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-p.done
		return nil, errors.New("wasmplane up did not print its URL within 60s")
	}
	if port != 0 && p.port != port {
		t.Fatalf("wasmplane up serves on port %d, want %d", p.port, port)
	}
	cs := testserver.NewClientset(t, testserver.KubeconfigConfig(t, dir, false))
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the server at %s never served: %w", p.url, err)
	}
	return p, nil
}

// kill9 sends SIGKILL: no shutdown code runs.
func (p *up) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-p.done
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cluster is one `wasmplane up` with its data directory and admin clients.
type cluster struct {
	t     *testing.T
	root  string // the test's temp dir: data dir, kubeconfigs, config files
	dir   string // the data dir
	proc  *up
	cfg   *rest.Config
	admin kubernetes.Interface
	dyn   dynamic.Interface
	home  string   // HOME for kubectl (its discovery cache)
	extra []string // extra flags of `wasmplane up`, kept across restarts
}

// newCluster starts `wasmplane up` on a fresh data dir and a free port.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterWith(t)
}

// newClusterWith is newCluster with extra flags for `wasmplane up` (e.g.
// --container-runtime-endpoint).
func newClusterWith(t *testing.T, extra ...string) *cluster {
	t.Helper()
	root := t.TempDir()
	c := &cluster{t: t, root: root, dir: filepath.Join(root, "data"), home: filepath.Join(root, "home"), extra: extra}
	if err := os.MkdirAll(c.home, 0o755); err != nil {
		t.Fatal(err)
	}
	c.proc = startUp(t, c.dir, 0, extra...)
	c.connect()
	return c
}

func (c *cluster) connect() {
	c.cfg = testserver.KubeconfigConfig(c.t, c.dir, false)
	c.admin = testserver.NewClientset(c.t, c.cfg)
	c.dyn = dynamic.NewForConfigOrDie(c.cfg)
}

// restart starts `wasmplane up` again on the same data dir and port (after kill9).
func (c *cluster) restart() {
	c.t.Helper()
	c.proc = startUp(c.t, c.dir, c.proc.port, c.extra...)
	c.connect()
}

func (c *cluster) adminKubeconfig() string { return filepath.Join(c.dir, "admin.kubeconfig") }

// wp runs a `wasmplane` subcommand with a deadline and returns its stdout; a non-zero exit
// is an error carrying stderr.
func (c *cluster) wp(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wasmplaneBin, args...)
	// An explicit --kubeconfig is always given; never fall back to another cluster's.
	cmd.Env = append(os.Environ(), "HOME="+c.home, "KUBECONFIG=", "WASMPLANE_DATA_DIR="+c.dir)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("wasmplane %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// kubectl runs `wasmplane kubectl --kubeconfig kubeconfig args…`.
func (c *cluster) kubectl(kubeconfig, stdin string, args ...string) (string, error) {
	return c.wp(stdin, append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
}

// mustKubectl is kubectl that fails the test on error.
func (c *cluster) mustKubectl(kubeconfig, stdin string, args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(kubeconfig, stdin, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// importImage imports a WASI module into the node's image store under names, with the
// running server in place: the runtime reads its store on every pull.
func (c *cluster) importImage(module string, names ...string) {
	c.t.Helper()
	args := []string{"image", "import", module, "--root", filepath.Join(c.dir, "node", "runtime")}
	for _, n := range names {
		args = append(args, "--name", n)
	}
	if _, err := c.wp("", args...); err != nil {
		c.t.Fatal(err)
	}
}

// writeFile writes a file under the test's root and returns its path.
func (c *cluster) writeFile(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.root, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// tokenKubeconfig writes a kubeconfig that presents a bearer token (for the WASM
// authenticator) and trusts the cluster's CA.
func (c *cluster) tokenKubeconfig(user, token, namespace string) string {
	c.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wasmplane"] = &clientcmdapi.Cluster{Server: c.proc.url, CertificateAuthority: filepath.Join(c.dir, "pki", "ca.crt")}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "wasmplane", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = user
	p := filepath.Join(c.root, user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		c.t.Fatalf("writing %s: %v", p, err)
	}
	return p
}

// pluginApply runs `wasmplane plugin apply` as the holder of kubeconfig and returns the
// generation the object reached (read back as the admin).
func (c *cluster) pluginApply(kubeconfig, name, namespace string, args ...string) (int64, error) {
	c.t.Helper()
	full := append([]string{"plugin", "apply", name, "--kubeconfig", kubeconfig}, args...)
	if namespace == "" {
		full = append(full, "--cluster")
	} else {
		full = append(full, "--namespace", namespace)
	}
	if _, err := c.wp("", full...); err != nil {
		return 0, err
	}
	obj, err := c.pluginResource(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading plugin %s back: %w", name, err)
	}
	return obj.GetGeneration(), nil
}

// mustPluginApply is pluginApply that fails the test on error and waits until the server
// reports the plugin loaded at the new generation.
func (c *cluster) mustPluginApply(kubeconfig, name, namespace string, args ...string) {
	c.t.Helper()
	gen, err := c.pluginApply(kubeconfig, name, namespace, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.waitPluginLoaded(name, namespace, gen)
}

func (c *cluster) pluginResource(namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return c.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("clusterwasmplugins"))
	}
	return c.dyn.Resource(wasmv1.SchemeGroupVersion.WithResource("wasmplugins")).Namespace(namespace)
}

// waitPluginLoaded waits until the server reports the plugin Loaded at generation gen or
// later; a Failed phase fails the test with the server's message.
func (c *cluster) waitPluginLoaded(name, namespace string, gen int64) {
	c.t.Helper()
	ri := c.pluginResource(namespace)
	waitfor.Condition(c.t, 90*time.Second, "plugin "+name+" to load", func(ctx context.Context) (bool, error) {
		cur, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		observed, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
		if phase == "Failed" {
			msg, _, _ := unstructured.NestedString(cur.Object, "status", "message")
			return false, fmt.Errorf("plugin %s failed to load: %s", name, msg)
		}
		return phase == "Loaded" && observed >= gen, nil
	})
}

// createNamespaces creates namespaces as the admin.
func (c *cluster) createNamespaces(names ...string) {
	c.t.Helper()
	for _, ns := range names {
		if _, err := c.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			c.t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
}

// waitCan waits until `kubectl auth can-i` says yes for the holder of kubeconfig: the
// aggregation controller fills the edit role a moment after start.
func (c *cluster) waitCan(kubeconfig string, args ...string) {
	c.t.Helper()
	waitfor.Condition(c.t, 60*time.Second, "kubectl auth can-i "+strings.Join(args, " "), func(context.Context) (bool, error) {
		out, _ := c.kubectl(kubeconfig, "", append([]string{"auth", "can-i"}, args...)...)
		return strings.TrimSpace(out) == "yes", nil
	})
}

// testCtx is a context that ends with the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// podRunning tells whether a pod is Running with all containers ready.
func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
