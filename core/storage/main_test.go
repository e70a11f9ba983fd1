package storage

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/storage/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// testClient is the client of the one embedded etcd all tests of the package share.
var testClient *clientv3.Client

var prefixSeq atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wasmplane-storage-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	testClient, err = NewClient(ClientConfig{Endpoints: srv.Endpoints()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testClient.Close()
	return m.Run()
}

var podsGR = schema.GroupResource{Resource: "pods"}

// podConfig is a pods resource under a prefix of its own, so tests do not see each other.
func podConfig(tb testing.TB) ResourceConfig {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(tb.Name())
	return ResourceConfig{
		GroupResource: podsGR,
		Prefix:        fmt.Sprintf("/t%d-%s/pods", prefixSeq.Add(1), name),
		NewFunc:       func() runtime.Object { return &corev1.Pod{} },
		NewListFunc:   func() runtime.Object { return &corev1.PodList{} },
		Codec:         NewCodec(scheme.Scheme),
	}
}

func newTestEtcd(tb testing.TB, opts ...EtcdOption) *Etcd {
	return NewEtcd(testClient, podConfig(tb), opts...)
}

func newTestCacher(tb testing.TB, copts CacherConfig, opts ...EtcdOption) *Cacher {
	tb.Helper()
	c := NewCacher(newTestEtcd(tb, opts...), copts)
	tb.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		tb.Fatal(err)
	}
	return c
}

func pod(ns, name string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
}

func podKey(cfg ResourceConfig, ns, name string) string {
	return cfg.Prefix + "/" + ns + "/" + name
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// createPods creates n pods in ns concurrently, labelled half "even"/"odd".
func createPods(tb testing.TB, s Interface, cfg ResourceConfig, ns string, n int) {
	tb.Helper()
	ctx := testCtx(tb)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			parity := "even"
			if i%2 == 1 {
				parity = "odd"
			}
			name := fmt.Sprintf("p-%05d", i)
			errs <- s.Create(ctx, podKey(cfg, ns, name), pod(ns, name, map[string]string{"parity": parity}), nil)
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
}
