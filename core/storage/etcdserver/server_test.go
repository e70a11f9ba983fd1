package etcdserver_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
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

// TestThreeMemberCluster starts three members of one cluster at once (a member is ready
// only when a quorum is), writes through one and reads through another, then stops one
// member and checks that the other two still serve writes.
func TestThreeMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	names := []string{"m0", "m1", "m2"}
	var peers, clients []string
	var initial []string
	for _, n := range names {
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
		clients = append(clients, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
		initial = append(initial, n+"="+peers[len(peers)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srvs := make([]*etcdserver.Server, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			srvs[i], errs[i] = etcdserver.Start(ctx, etcdserver.Config{DataDir: t.TempDir(), Name: n,
				ClientURL: clients[i], PeerURL: peers[i], InitialCluster: strings.Join(initial, ","),
				InitialClusterToken: "test-" + t.Name()})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %s: %v", names[i], err)
		}
		defer srvs[i].Close()
	}
	writePods(t, podStore(t, srvs[0]), 10)
	if n := countPods(t, podStore(t, srvs[2])); n != 10 {
		t.Fatalf("member m2 lists %d pods, want 10", n)
	}
	srvs[0].Close()
	c, err := storage.NewClient(storage.ClientConfig{Endpoints: clients[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(ctx, "/after-loss", "x"); err != nil {
		t.Fatalf("writing with two of three members: %v", err)
	}
}

func TestInitialClusterStateValidated(t *testing.T) {
	_, err := etcdserver.Start(context.Background(), etcdserver.Config{DataDir: t.TempDir(), InitialClusterState: "bogus"})
	if err == nil || !strings.Contains(err.Error(), "initial cluster state") {
		t.Fatalf("err = %v, want an initial cluster state error", err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDataDirInUse: a second member on a data dir in use fails at once with a clear error
// instead of waiting forever for the database lock.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	srv, _ := start(t, dir)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	second, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: dir})
	if err == nil {
		second.Close()
		t.Fatal("a second server started on a data dir in use")
	}
	if !strings.Contains(err.Error(), "is in use by another process") {
		t.Fatalf("got %v, want the data dir in use", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("refused after %v, want at once", d)
	}
	srv.Close()
	// Once released, the same dir starts again.
	again, _ := start(t, dir)
	again.Close()
}
