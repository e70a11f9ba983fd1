package e2e

import (
	"bufio"
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKill9Durability creates 1,000 configmaps through the real binary, kills it with
// SIGKILL, restarts it on the same data dir and port, and finds all of them: an
// acknowledged write is never lost.
func TestKill9Durability(t *testing.T) {
	dir := t.TempDir()
	port := testserver.FreePort(t)
	p := startBinary(t, dir, port)
	cs := testserver.NewClientset(t, testserver.KubeconfigConfig(t, dir, false))
	ctx := ctxFor(t)
	const n = 1000
	const ns = "default"
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i)}, Data: map[string]string{"i": strconv.Itoa(i)}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}

	p.kill9(t)
	p = startBinary(t, dir, port)
	cs = testserver.NewClientset(t, testserver.KubeconfigConfig(t, dir, false))
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	found := map[string]string{}
	for _, cm := range l.Items {
		found[cm.Name] = cm.Data["i"]
	}
	for i := range n {
		if v, ok := found["cm-"+strconv.Itoa(i)]; !ok || v != strconv.Itoa(i) {
			t.Errorf("cm-%d after kill -9: present=%v data=%q", i, ok, v)
		}
	}
}

// process is a running `wasmplane up`.
type process struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

var urlLine = regexp.MustCompile(`wasmplane is up at (http\S+)`)

// startBinary runs `wasmplane up` on dir and port, waits until it prints its URL and
// serves, and kills it when the test ends.
func startBinary(t *testing.T, dir string, port int) *process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(wasmplaneBin, "up", "--data-dir", dir, "--port", strconv.Itoa(port), "--log-level", "error", "--disable-kubelet")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testWriter{t: t, prefix: "wasmplane: "}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", wasmplaneBin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case u := <-urls:
		cs := testserver.NewClientset(t, testserver.KubeconfigConfig(t, dir, false))
		waitfor.Condition(t, 20*time.Second, "the restarted server to serve", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if want := fmt.Sprintf("https://127.0.0.1:%d", port); u != want {
			t.Fatalf("server at %s, want %s", u, want)
		}
		p.url = u
		return p
	case <-p.done:
		t.Fatalf("wasmplane up exited: %v", cmd.ProcessState)
	case <-ctx.Done():
		t.Fatal("wasmplane up did not print its URL in time")
	}
	return nil
}

// kill9 sends SIGKILL: no shutdown code runs, only what etcd synced survives.
func (p *process) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-p.done
}

// testWriter forwards a child's stderr to the test log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + string(p))
	return len(p), nil
}
