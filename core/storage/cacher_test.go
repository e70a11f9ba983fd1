package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestCacherList(t *testing.T) {
	c := newTestCacher(t, CacherConfig{FreshnessTimeout: 2 * time.Second})
	ctx := testCtx(t)
	createPods(t, c, c.cfg, "ns", 100)
	createPods(t, c, c.cfg, "other", 3)
	// A consistent list (rv "") sees a write acknowledged just before it.
	last := &corev1.Pod{}
	if err := c.Create(ctx, podKey(c.cfg, "ns", "zz-last"), pod("ns", "zz-last", nil), last); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  string
		opts ListOptions
		want int
	}{
		{"consistent", c.cfg.Prefix + "/ns/", ListOptions{Recursive: true}, 101},
		{"any", c.cfg.Prefix + "/ns", ListOptions{Recursive: true, ResourceVersion: "0"}, -1},
		{"not older than", c.cfg.Prefix + "/ns/", ListOptions{Recursive: true, ResourceVersion: last.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, 101},
		{"selector", c.cfg.Prefix + "/", ListOptions{Recursive: true,
			Predicate: SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"parity": "odd"})}}, 51},
		{"single key", podKey(c.cfg, "ns", "p-00007"), ListOptions{}, 1},
		{"paged", c.cfg.Prefix + "/ns/", ListOptions{Recursive: true,
			Predicate: SelectionPredicate{Limit: 10}}, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			list := &corev1.PodList{}
			if err := c.GetList(ctx, tc.key, tc.opts, list); err != nil {
				t.Fatal(err)
			}
			if tc.want >= 0 && len(list.Items) != tc.want {
				t.Fatalf("%d items, want %d", len(list.Items), tc.want)
			}
			for i := 1; i < len(list.Items); i++ {
				if list.Items[i-1].Namespace+"/"+list.Items[i-1].Name >= list.Items[i].Namespace+"/"+list.Items[i].Name {
					t.Fatal("list not ordered by key")
				}
			}
			if list.ResourceVersion == "" {
				t.Fatal("list has no resourceVersion")
			}
		})
	}
	if n := c.fallbacks.Load(); n != 0 {
		t.Fatalf("%d consistent lists fell back to etcd", n)
	}
	// Get rv "0" is from the cache, and the caller owns the result.
	got := &corev1.Pod{}
	if err := c.Get(ctx, podKey(c.cfg, "ns", "zz-last"), GetOptions{ResourceVersion: last.ResourceVersion}, got); err != nil {
		t.Fatal(err)
	}
	got.Labels = map[string]string{"mutated": "yes"}
	again := &corev1.Pod{}
	if err := c.Get(ctx, podKey(c.cfg, "ns", "zz-last"), GetOptions{ResourceVersion: "0"}, again); err != nil {
		t.Fatal(err)
	}
	if again.Labels["mutated"] != "" || again.ResourceVersion != last.ResourceVersion {
		t.Fatalf("cache corrupted by a caller: %v %s", again.Labels, again.ResourceVersion)
	}
}

func TestCachingObjectEncodesOnce(t *testing.T) {
	p := pod("ns", "a", nil)
	p.Kind, p.APIVersion = "Pod", "v1"
	co := NewCachingObject(p)
	calls := 0
	enc := func(obj runtime.Object, w io.Writer) error {
		calls++
		obj.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind()) // may mutate: it is a copy
		obj.(*corev1.Pod).Name = "mutated"
		_, err := w.Write([]byte("bytes"))
		return err
	}
	for i := 0; i < 3; i++ {
		var buf bytes.Buffer
		if err := co.CacheEncode("id", enc, &buf); err != nil || buf.String() != "bytes" {
			t.Fatal(err, buf.String())
		}
	}
	if calls != 1 || p.Name != "a" {
		t.Fatalf("encoded %d times; shared name %q", calls, p.Name)
	}
	// apimachinery's serializers go through CacheEncode.
	js := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	var a, b bytes.Buffer
	if err := js.Encode(co, &a); err != nil {
		t.Fatal(err)
	}
	if err := js.Encode(co, &b); err != nil || a.String() != b.String() || !bytes.Contains(a.Bytes(), []byte(`"name":"a"`)) {
		t.Fatalf("%v %s", err, a.String())
	}
	if g := co.GetObject().(*corev1.Pod); g == p {
		t.Fatal("GetObject must return a copy")
	}
}

// collect reads n events from w, failing on anything but the expected names in order.
func collect(w watch.Interface, names []string, errs chan<- error) {
	for i, want := range names {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				errs <- fmt.Errorf("closed after %d events", i)
				return
			}
			if p, ok := ev.Object.(runtime.CacheableObject).GetObject().(*corev1.Pod); !ok || p.Name != want || ev.Type != watch.Added {
				errs <- fmt.Errorf("event %d: %s %v, want ADDED %s", i, ev.Type, p, want)
				return
			}
		case <-time.After(30 * time.Second):
			errs <- fmt.Errorf("timed out after %d events", i)
			return
		}
	}
	errs <- nil
}

func TestCacherFanOut(t *testing.T) {
	watchers, events := 1000, 50
	if testing.Short() {
		watchers = 100
	}
	c := newTestCacher(t, CacherConfig{})
	ctx := testCtx(t)
	rv, err := c.CurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]watch.Interface, watchers)
	for i := range ws {
		ws[i], err = c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: fmt.Sprint(rv)})
		if err != nil {
			t.Fatal(err)
		}
		defer ws[i].Stop()
	}
	names := make([]string, events)
	for i := range names {
		names[i] = fmt.Sprintf("p-%05d", i)
	}
	errs := make(chan error, watchers)
	for _, w := range ws {
		go collect(w, names, errs)
	}
	for _, n := range names {
		if err := c.Create(ctx, podKey(c.cfg, "ns", n), pod("ns", n, nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range ws {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestCacherDropsStalledWatcher(t *testing.T) {
	c := newTestCacher(t, CacherConfig{WatcherBufferSize: 8, DispatchTimeout: 20 * time.Millisecond})
	ctx := testCtx(t)
	stalled, err := c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Stop()
	const readers, events = 10, 60
	ws := make([]watch.Interface, readers)
	for i := range ws {
		if ws[i], err = c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0"}); err != nil {
			t.Fatal(err)
		}
		defer ws[i].Stop()
	}
	names := make([]string, events)
	for i := range names {
		names[i] = fmt.Sprintf("p-%05d", i)
	}
	errs := make(chan error, readers)
	for _, w := range ws {
		go collect(w, names, errs)
	}
	for _, n := range names {
		if err := c.Create(ctx, podKey(c.cfg, "ns", n), pod("ns", n, nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range ws {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The stalled watcher was closed: draining it ends before all events.
	got := 0
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-stalled.ResultChan():
			if !ok {
				if got >= events {
					t.Fatalf("stalled watcher got all %d events", got)
				}
				return
			}
			got++
		case <-deadline:
			t.Fatal("stalled watcher was not closed")
		}
	}
}

func TestCacherStopEndsWatchers(t *testing.T) {
	e := newTestEtcd(t)
	c := NewCacher(e, CacherConfig{})
	ctx := testCtx(t)
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	var ws []watch.Interface
	for i := 0; i < 10; i++ {
		w, err := c.Watch(ctx, e.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	c.Stop()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range w.ResultChan() {
			}
		}()
	}
	wg.Wait() // every result channel closed (Stop waited for the goroutines)
	for _, w := range ws {
		w.Stop()
	}
	// Nothing of the cacher is left running.
	buf := make([]byte, 1<<22)
	stacks := string(buf[:goruntime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "storage.(*Cacher)") || strings.Contains(g, "storage.(*cacheWatcher)") {
			t.Fatalf("goroutine left after Stop:\n%s", g)
		}
	}
}

func TestCacherPaging(t *testing.T) {
	c := newTestCacher(t, CacherConfig{})
	createPods(t, c, c.cfg, "ns", 1000)
	key := c.cfg.Prefix + "/ns/"
	for _, tc := range []struct {
		name string
		pred SelectionPredicate
		want int
	}{
		{"all", SelectionPredicate{Limit: 100}, 1000},
		{"selector", SelectionPredicate{Limit: 100, Label: labels.SelectorFromSet(labels.Set{"parity": "even"})}, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, pages := listAll(t, c, key, tc.pred)
			if len(names) != tc.want {
				t.Fatalf("%d names, want %d", len(names), tc.want)
			}
			if tc.pred.Label == nil && (pages[0].RemainingItemCount == nil || *pages[0].RemainingItemCount != 900) {
				t.Fatalf("remainingItemCount %v", pages[0].RemainingItemCount)
			}
		})
	}
	// A token the cache no longer holds a snapshot for is served by etcd at its revision.
	ctx := testCtx(t)
	first := &corev1.PodList{}
	if err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 600}}, first); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < keptSnapshots+1; i++ {
		setLabel(t, c, podKey(c.cfg, "ns", "p-00000"), "round", fmt.Sprint(i))
		if err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 1}}, &corev1.PodList{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.retained(mustRV(t, first.ResourceVersion)); ok {
		t.Fatal("snapshot still kept")
	}
	rest := &corev1.PodList{}
	if err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 600, Continue: first.Continue}}, rest); err != nil {
		t.Fatal(err)
	}
	if len(first.Items)+len(rest.Items) != 1000 || rest.ResourceVersion != first.ResourceVersion || rest.Continue != "" {
		t.Fatalf("%d+%d items at %s/%s", len(first.Items), len(rest.Items), first.ResourceVersion, rest.ResourceVersion)
	}
}

// A kept snapshot stops serving continue tokens once etcd is known to be compacted past
// it: the token gets etcd's 410, with the token to go on inconsistently.
func TestCacherPagingAfterCompaction(t *testing.T) {
	compacted := &CompactedRevision{}
	c := newTestCacher(t, CacherConfig{Compacted: compacted})
	createPods(t, c, c.cfg, "ns", 30)
	key := c.cfg.Prefix + "/ns/"
	ctx := testCtx(t)
	first := &corev1.PodList{}
	if err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 10}}, first); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.retained(mustRV(t, first.ResourceVersion)); !ok {
		t.Fatal("first page's snapshot not kept")
	}
	setLabel(t, c, podKey(c.cfg, "ns", "p-00000"), "after", "first-page")
	compacted.Observe(compactNow(t))
	err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 10, Continue: first.Continue}}, &corev1.PodList{})
	assertStatus(t, err, metav1.StatusReasonExpired, http.StatusGone)
	tok := err.(interface{ Status() metav1.Status }).Status().Continue
	rest := &corev1.PodList{}
	if err := c.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 10, Continue: tok}}, rest); err != nil {
		t.Fatal(err)
	}
	if len(rest.Items) != 10 || rest.Items[0].Name != "p-00010" || rest.ResourceVersion == first.ResourceVersion {
		t.Fatalf("%d items from %s at %s", len(rest.Items), rest.Items[0].Name, rest.ResourceVersion)
	}
}

func mustRV(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := parseRV(rv)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCacherEtcdWatchBreaks(t *testing.T) {
	c := newTestCacher(t, CacherConfig{})
	ctx := testCtx(t)
	createPods(t, c, c.cfg, "ns", 3)
	w, err := c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 3; i++ {
		nextEvent(t, w)
	}
	t.Run("transient: watchers keep going", func(t *testing.T) {
		c.breakWatch <- fmt.Errorf("connection reset")
		if err := c.Create(ctx, podKey(c.cfg, "ns", "after-break"), pod("ns", "after-break", nil), nil); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, w, wantEvent{watch.Added, "after-break"})
	})
	t.Run("compacted: relist, watchers closed", func(t *testing.T) {
		c.breakWatch <- errWatchCompacted
		for {
			if _, ok := <-w.ResultChan(); !ok {
				break
			}
		}
		if err := c.Create(ctx, podKey(c.cfg, "ns", "after-relist"), pod("ns", "after-relist", nil), nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		list := &corev1.PodList{}
		if err := c.GetList(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true}, list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 5 {
			t.Fatalf("%d items after relist, want 5", len(list.Items))
		}
	})
}

// TestCacherStats checks the object count and average stored size the cache reports
// (what API Priority and Fairness charges a LIST by) against etcd's own keys, after
// creates, an update that grows an object and deletes.
func TestCacherStats(t *testing.T) {
	c := newTestCacher(t, CacherConfig{})
	ctx := testCtx(t)
	steps := []struct {
		name   string
		change func(t *testing.T)
		want   int64
	}{
		{"empty", func(*testing.T) {}, 0},
		{"created", func(t *testing.T) { createPods(t, c, c.cfg, "ns", 5) }, 5},
		{"grown", func(t *testing.T) {
			out := &corev1.Pod{}
			err := c.GuaranteedUpdate(ctx, podKey(c.cfg, "ns", "p-00001"), out, false, nil, func(obj runtime.Object, _ ResponseMeta) (runtime.Object, error) {
				p := obj.(*corev1.Pod)
				p.Annotations = map[string]string{"big": strings.Repeat("x", 4096)}
				return p, nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}, 5},
		{"deleted", func(t *testing.T) {
			for _, name := range []string{"p-00000", "p-00001"} {
				if err := c.Delete(ctx, podKey(c.cfg, "ns", name), &corev1.Pod{}, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
		}, 3},
	}
	for _, st := range steps {
		st.change(t)
		resp, err := c.store.client.Get(ctx, c.prefix(), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for _, kv := range resp.Kvs {
			want += int64(len(kv.Value))
		}
		if len(resp.Kvs) > 0 {
			want /= int64(len(resp.Kvs))
		}
		// The cache follows etcd's watch: wait until it has the same count and size.
		var count, size int64
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			var ok bool
			count, size, ok = c.Stats()
			return ok && count == st.want && size == want, nil
		})
		if err != nil {
			t.Fatalf("%s: stats %d objects of %d bytes, want %d of %d", st.name, count, size, st.want, want)
		}
	}
}
