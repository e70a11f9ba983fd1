package robustness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// proc is a `wasmplane` subprocess that can be killed, stopped and started again with
// the same arguments (and so the same data directory and ports).
type proc struct {
	name string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	url  string // `up` only: the URL it printed
}

// start runs the process; for `up` it waits for the URL and for the admin to be served.
func (p *proc) start(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := p.tryStart(t)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("starting %s: %v", p.name, err)
		}
		// A port a killed process just released may still be busy for a moment.
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *proc) tryStart(t *testing.T) error {
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", p.log, err)
	}
	cmd := exec.Command(wasmplaneBin, p.args...)
	cmd.Stderr = logFile
	var urls <-chan string
	if p.args[0] == "up" {
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			_ = logFile.Close()
			return err
		}
		urls = testserver.UpURLs(io.TeeReader(stdout, logFile))
	} else {
		cmd.Stdout = logFile
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	if urls == nil {
		return nil
	}
	select {
	case p.url = <-urls:
	case <-done:
		return fmt.Errorf("%s exited (%v)", p.name, cmd.ProcessState)
	case <-time.After(60 * time.Second):
		p.kill()
		return errors.New("no URL within 60s")
	}
	cs := testserver.NewClientset(t, p.config(t, 0))
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// config is an admin client configuration for an `up` process (timeout 0 = none).
func (p *proc) config(t *testing.T, timeout time.Duration) *rest.Config {
	cfg := testserver.KubeconfigConfig(t, p.dataDir(), false)
	cfg.Host, cfg.Timeout = p.url, timeout
	return cfg
}

func (p *proc) dataDir() string {
	for i, a := range p.args {
		if a == "--data-dir" {
			return p.args[i+1]
		}
	}
	return ""
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s %s: %v", sig, p.name, err)
	}
}

// env is the processes one set of runs shares: one `up` on embedded etcd, or a 3-member
// etcd and two `up` API servers on it.
type env struct {
	t        *testing.T
	root     string
	ups      []*proc
	etcd     []*proc
	etcdURLs []string
}

func newProc(t *testing.T, root, name string, args ...string) *proc {
	p := &proc{name: name, args: args, log: filepath.Join(root, name+".log")}
	t.Cleanup(func() {
		if p.cmd != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			p.kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("last lines of %s:\n%s", p.log, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

// upArgs are the flags of every `up`: only the API server, as the suite's traffic needs
// nothing else and the machine is shared.
func upArgs(dataDir string, port int, extra ...string) []string {
	return append([]string{"up", "--data-dir", dataDir, "--port", strconv.Itoa(port), "--kubelet-port", "-1",
		"--disable-kubelet", "--disable-controllers", "--disable-scheduler", "--log-level", "warn"}, extra...)
}

// newSingleEnv is one `up` on its embedded etcd.
func newSingleEnv(t *testing.T) *env {
	root := t.TempDir()
	e := &env{t: t, root: root}
	up := newProc(t, root, "up", upArgs(filepath.Join(root, "data"), testserver.FreePort(t))...)
	up.start(t)
	e.ups = []*proc{up}
	return e
}

// newHAEnv is a 3-member etcd (`wasmplane etcd`) and two `up` API servers sharing it and
// one PKI.
func newHAEnv(t *testing.T) *env {
	root := t.TempDir()
	e := &env{t: t, root: root}
	var initial, peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", testserver.FreePort(t)))
		e.etcdURLs = append(e.etcdURLs, fmt.Sprintf("http://127.0.0.1:%d", testserver.FreePort(t)))
		initial = append(initial, fmt.Sprintf("etcd-%d=%s", i, peers[i]))
	}
	for i := range 3 {
		name := fmt.Sprintf("etcd-%d", i)
		m := newProc(t, root, name, "etcd", "--name", name, "--data-dir", filepath.Join(root, name), "--client-url", e.etcdURLs[i],
			"--peer-url", peers[i], "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "robustness", "--log-level", "warn")
		m.start(t)
		e.etcd = append(e.etcd, m)
	}
	etcdFlag := "--etcd-servers=" + strings.Join(e.etcdURLs, ",")
	a := newProc(t, root, "apiserver-a", upArgs(filepath.Join(root, "a"), testserver.FreePort(t), etcdFlag)...)
	a.start(t)
	sharePKI(t, filepath.Join(root, "a", "pki"), filepath.Join(root, "b", "pki"))
	b := newProc(t, root, "apiserver-b", upArgs(filepath.Join(root, "b"), testserver.FreePort(t), etcdFlag)...)
	b.start(t)
	e.ups = []*proc{a, b}
	return e
}

// etcdLeader returns the index of the etcd member that leads now.
func (e *env) etcdLeader(ctx context.Context) (int, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: e.etcdURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	var lastErr error
	for i, u := range e.etcdURLs {
		sctx, cancel := context.WithTimeout(ctx, time.Second) // a killed member does not answer
		st, err := c.Status(sctx, u)
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		if st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no member says it leads: %v", lastErr)
}

// compact compacts etcd to its current revision, so every watch that must resume from an
// older resourceVersion and every continue token gets 410 Gone.
func (e *env) compact(ctx context.Context) (int64, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: e.etcdURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, "compact-probe")
	if err != nil {
		return 0, fmt.Errorf("current revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting to %d: %w", rev, err)
	}
	return rev, nil
}

// clientsets builds n traffic clients spread over the API servers.
func (e *env) clientsets(n int, timeout time.Duration) []kubernetes.Interface {
	var out []kubernetes.Interface
	for i := range n {
		out = append(out, testserver.NewClientset(e.t, e.ups[i%len(e.ups)].config(e.t, timeout)))
	}
	return out
}

// sharePKI copies an API server's pki directory for another one, private to its owner as
// the original is.
func sharePKI(t *testing.T, src, dst string) {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("sharing the PKI: %v", err)
	}
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatalf("sharing the PKI: %v", err)
	}
}
