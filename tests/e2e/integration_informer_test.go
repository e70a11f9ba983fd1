package e2e

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestPodInformer drives a SharedInformerFactory through ordinary changes, a server
// restart on the same data dir and port, a compaction under a live watch, and a compaction
// it missed while disconnected (the server must answer 410 and the informer relist).
func TestPodInformer(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := ctxFor(t)
	ns := newNamespace(t, cs, "informer")
	pods := cs.CoreV1().Pods(ns)

	g := &gate{}
	icfg := srv.Config(false)
	icfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g })
	factory := informers.NewSharedInformerFactoryWithOptions(testserver.NewClientset(t, icfg), 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	rec := &recorder{}
	if _, err := informer.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}

	create := func(name string) {
		t.Helper()
		if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: podSpec()}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	touch := func(name, value string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"touched":"` + value + `"}}}`
		if _, err := pods.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch %s: %v", name, err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	// settle waits until the informer saw want for every listed pod and its store holds
	// exactly the server's pods at their current resourceVersions.
	settle := func(phase string, want map[string][]string) {
		t.Helper()
		waitfor.Condition(t, 60*time.Second, phase, func(ctx context.Context) (bool, error) {
			for name, seq := range want {
				if !slices.Equal(rec.sequence(name), seq) {
					return false, nil
				}
			}
			return storeMatchesServer(ctx, informer.GetStore(), cs.CoreV1().Pods(ns).List)
		})
		for name, seq := range want {
			if got := rec.sequence(name); !slices.Equal(got, seq) {
				t.Fatalf("%s: events of %s = %v, want %v", phase, name, got, seq)
			}
		}
	}

	// 1. Order of ordinary events.
	create("p1")
	touch("p1", "1")
	remove("p1")
	settle("ordinary events", map[string][]string{"p1": {"ADDED", "MODIFIED", "DELETED"}})

	// 2. A restart on the same data dir and port: the informer's watch breaks, it
	// reconnects on its own and misses nothing.
	create("p2")
	settle("before restart", map[string][]string{"p2": {"ADDED"}})
	srv = srv.Restart(t)
	touch("p2", "after-restart")
	create("p3")
	settle("after restart", map[string][]string{"p2": {"ADDED", "MODIFIED"}, "p3": {"ADDED"}})

	etcd := srv.EtcdClient(t)
	compact := func() {
		t.Helper()
		resp, err := etcd.Get(ctx, "compaction-probe")
		if err != nil {
			t.Fatalf("etcd get: %v", err)
		}
		if _, err := etcd.Compact(ctx, resp.Header.Revision); err != nil {
			t.Fatalf("etcd compact to %d: %v", resp.Header.Revision, err)
		}
	}

	// 3. A compaction under a live watch changes nothing for the informer.
	compact()
	touch("p3", "after-compaction")
	settle("compaction under a live watch", map[string][]string{"p3": {"ADDED", "MODIFIED"}})

	// 4. The informer is cut off, changes are made and compacted away, and the server
	// restarts with an empty watch cache: its resourceVersion is gone, so the server must
	// answer 410 and the informer relist to exactly the right set.
	lists := g.lists.Load()
	g.close()
	create("p4")
	touch("p3", "while-away")
	remove("p2")
	compact()
	srv = srv.Restart(t)
	g.open()
	settle("relist after compaction", map[string][]string{
		"p1": {"ADDED", "MODIFIED", "DELETED"},
		"p2": {"ADDED", "MODIFIED", "DELETED"},
		"p3": {"ADDED", "MODIFIED", "MODIFIED"},
		"p4": {"ADDED"},
	})
	if g.lists.Load() == lists {
		t.Fatalf("the informer caught up without relisting across a compacted resourceVersion")
	}
	if n := rec.noops.Load(); n > 3 {
		// A relist replays the unchanged pods as updates with the same resourceVersion;
		// more of those than pods in the store means a relisting storm.
		t.Fatalf("%d no-op updates: the informer relisted more than once", n)
	}
	_ = srv
}

// storeMatchesServer compares the informer's store with a fresh list from the server.
func storeMatchesServer(ctx context.Context, store cache.Store, list func(context.Context, metav1.ListOptions) (*corev1.PodList, error)) (bool, error) {
	l, err := list(ctx, metav1.ListOptions{})
	if err != nil {
		return false, nil // the server may be restarting
	}
	want := map[string]string{}
	for _, p := range l.Items {
		want[p.Name] = p.ResourceVersion
	}
	got := map[string]string{}
	for _, o := range store.List() {
		p := o.(*corev1.Pod)
		got[p.Name] = p.ResourceVersion
	}
	if len(got) != len(want) {
		return false, nil
	}
	for k, v := range want {
		if got[k] != v {
			return false, nil
		}
	}
	return true, nil
}

// recorder keeps the informer's notifications per pod, in delivery order. Updates that
// change nothing (a relist replaying an unchanged pod) are counted apart: they are not
// events of the pod's history.
type recorder struct {
	mu     sync.Mutex
	events map[string][]string
	noops  atomic.Int32
}

func (r *recorder) add(name, typ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = map[string][]string{}
	}
	r.events[name] = append(r.events[name], typ)
}

func (r *recorder) sequence(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events[name])
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.add(obj.(*corev1.Pod).Name, "ADDED") },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
			if o.ResourceVersion == n.ResourceVersion {
				r.noops.Add(1)
				return
			}
			r.add(n.Name, "MODIFIED")
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			r.add(obj.(*corev1.Pod).Name, "DELETED")
		},
	}
}

// gate is a RoundTripper that can cut a client off the server as if it were down: while
// closed, new requests are refused (ECONNREFUSED, which makes a reflector retry its watch
// from its resourceVersion instead of relisting) and open watch streams end. It counts the
// requests that fetch the whole state (lists, and watches that send initial events).
type gate struct {
	next   http.RoundTripper
	lists  atomic.Int32
	mu     sync.Mutex
	closed bool
	bodies map[*gatedBody]struct{}
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	q := req.URL.Query()
	isWatch := q.Get("watch") == "true" || q.Get("watch") == "1"
	if !isWatch || q.Get("sendInitialEvents") == "true" {
		g.lists.Add(1)
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil || !isWatch {
		return resp, err
	}
	b := &gatedBody{ReadCloser: resp.Body, g: g}
	g.mu.Lock()
	if g.bodies == nil {
		g.bodies = map[*gatedBody]struct{}{}
	}
	g.bodies[b] = struct{}{}
	g.mu.Unlock()
	resp.Body = b
	return resp, nil
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for b := range g.bodies {
		b.cut.Store(true)
		_ = b.ReadCloser.Close()
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

// gatedBody ends a watch stream cleanly (EOF) once its gate is closed, like a server
// that went away between two events.
type gatedBody struct {
	io.ReadCloser
	g   *gate
	cut atomic.Bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.cut.Load() {
		return n, io.EOF
	}
	return n, err
}

func (b *gatedBody) Close() error {
	b.g.mu.Lock()
	delete(b.g.bodies, b)
	b.g.mu.Unlock()
	return b.ReadCloser.Close()
}
