package etcdserver_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

const childEnv = "WASMPLANE_ETCD_CRASH_CHILD_DIR"

func podStore(t testing.TB, srv *etcdserver.Server) *storage.Etcd {
	t.Helper()
	c, err := storage.NewClient(storage.ClientConfig{Endpoints: srv.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return storage.NewEtcd(c, storage.ResourceConfig{
		GroupResource: schema.GroupResource{Resource: "pods"},
		Prefix:        "/registry/pods",
		NewFunc:       func() runtime.Object { return &corev1.Pod{} },
		NewListFunc:   func() runtime.Object { return &corev1.PodList{} },
		Codec:         storage.NewCodec(scheme.Scheme),
	})
}

func start(t testing.TB, dir string) (*etcdserver.Server, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return srv, time.Since(t0)
}

func writePods(t testing.TB, s *storage.Etcd, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("p-%04d", i)
			errs <- s.Create(ctx, "/registry/pods/ns/"+name, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, nil)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func countPods(t testing.TB, s *storage.Etcd) int {
	list := &corev1.PodList{}
	if err := s.GetList(context.Background(), "/registry/pods/", storage.ListOptions{Recursive: true}, list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// TestCrashChild is the process the crash test kills; it is a no-op in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("only run as the crash test's child process")
	}
	srv, _ := start(t, dir)
	writePods(t, podStore(t, srv), 1000)
	fmt.Println("WRITTEN")
	select {} // wait for SIGKILL
}

func TestCrashDurability(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	written := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "WRITTEN") {
			written = true
			break
		}
	}
	if !written {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child did not write")
	}
	if err := cmd.Process.Kill(); err != nil { // kill -9: no graceful close
		t.Fatal(err)
	}
	_ = cmd.Wait()

	srv, took := start(t, dir)
	defer srv.Close()
	t.Logf("restart after kill -9 ready in %s", took)
	if n := countPods(t, podStore(t, srv)); n != 1000 {
		t.Fatalf("%d pods after crash, want 1000", n)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	srv, first := start(t, dir)
	writePods(t, podStore(t, srv), 100)
	srv.Close()
	srv, again := start(t, dir)
	defer srv.Close()
	t.Logf("fresh start %s, reopen %s", first, again)
	if n := countPods(t, podStore(t, srv)); n != 100 {
		t.Fatalf("%d pods after reopen, want 100", n)
	}
	if len(srv.Endpoints()) != 1 || !strings.HasPrefix(srv.Endpoints()[0], "http://127.0.0.1:") {
		t.Fatalf("endpoints %v", srv.Endpoints())
	}
}
