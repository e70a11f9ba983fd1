package storage

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// impls runs f against the direct etcd store and the cacher.
func impls(t *testing.T, copts CacherConfig, eopts []EtcdOption, f func(t *testing.T, s Interface, cfg ResourceConfig)) {
	t.Run("etcd", func(t *testing.T) {
		e := newTestEtcd(t, eopts...)
		f(t, e, e.cfg)
	})
	t.Run("cacher", func(t *testing.T) {
		if copts.FreshnessTimeout == 0 {
			copts.FreshnessTimeout = 500 * time.Millisecond
		}
		c := newTestCacher(t, copts, eopts...)
		f(t, c, c.cfg)
	})
}

func unwrap(obj runtime.Object) runtime.Object {
	if co, ok := obj.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return obj
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return watch.Event{}
}

type wantEvent struct {
	typ  watch.EventType
	name string
}

func expectEvents(t *testing.T, w watch.Interface, want ...wantEvent) []*corev1.Pod {
	t.Helper()
	var got []*corev1.Pod
	for i, we := range want {
		ev := nextEvent(t, w)
		if ev.Type == watch.Error {
			t.Fatalf("event %d: error %v", i, ev.Object)
		}
		p := unwrap(ev.Object).(*corev1.Pod)
		if ev.Type != we.typ || p.Name != we.name {
			t.Fatalf("event %d: got %s %s, want %s %s", i, ev.Type, p.Name, we.typ, we.name)
		}
		got = append(got, p)
	}
	return got
}

func rvOf(t *testing.T, obj runtime.Object) uint64 {
	t.Helper()
	p := unwrap(obj).(*corev1.Pod)
	n, err := strconv.ParseUint(p.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("rv %q: %v", p.ResourceVersion, err)
	}
	return n
}

func setLabel(t *testing.T, s Interface, key, k, v string) {
	t.Helper()
	err := s.GuaranteedUpdate(testCtx(t), key, &corev1.Pod{}, false, nil,
		func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
			p := in.(*corev1.Pod)
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[k] = v
			return p, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatchFromResourceVersion(t *testing.T) {
	impls(t, CacherConfig{}, nil, func(t *testing.T, s Interface, cfg ResourceConfig) {
		ctx := testCtx(t)
		a := &corev1.Pod{}
		if err := s.Create(ctx, podKey(cfg, "ns", "a"), pod("ns", "a", nil), a); err != nil {
			t.Fatal(err)
		}
		w, err := s.Watch(ctx, cfg.Prefix+"/ns/", ListOptions{ResourceVersion: a.ResourceVersion, Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := s.Create(ctx, podKey(cfg, "ns", "b"), pod("ns", "b", nil), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, podKey(cfg, "other", "x"), pod("other", "x", nil), nil); err != nil {
			t.Fatal(err)
		}
		setLabel(t, s, podKey(cfg, "ns", "b"), "v", "2")
		del := &corev1.Pod{}
		if err := s.Delete(ctx, podKey(cfg, "ns", "a"), del, nil, nil); err != nil {
			t.Fatal(err)
		}
		got := expectEvents(t, w, wantEvent{watch.Added, "b"}, wantEvent{watch.Modified, "b"}, wantEvent{watch.Deleted, "a"})
		if got[1].Labels["v"] != "2" {
			t.Fatalf("modified event carries %v", got[1].Labels)
		}
		if got[2].ResourceVersion != del.ResourceVersion {
			t.Fatalf("DELETED at rv %s, want the deletion revision %s", got[2].ResourceVersion, del.ResourceVersion)
		}
		for i := 1; i < len(got); i++ {
			if rvOf(t, got[i]) <= rvOf(t, got[i-1]) {
				t.Fatal("events out of order")
			}
		}
	})
}

func TestWatchInitialEvents(t *testing.T) {
	impls(t, CacherConfig{}, nil, func(t *testing.T, s Interface, cfg ResourceConfig) {
		ctx := testCtx(t)
		createPods(t, s, cfg, "ns", 5)
		t.Run("watch-list", func(t *testing.T) {
			yes := true
			w, err := s.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, SendInitialEvents: &yes,
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				Predicate:            SelectionPredicate{AllowWatchBookmarks: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var maxRV uint64
			for i := 0; i < 5; i++ {
				ev := nextEvent(t, w)
				if ev.Type != watch.Added {
					t.Fatalf("initial event %d is %s", i, ev.Type)
				}
				maxRV = max(maxRV, rvOf(t, ev.Object))
			}
			bm := nextEvent(t, w)
			if bm.Type != watch.Bookmark {
				t.Fatalf("want the initial-events-end bookmark, got %s", bm.Type)
			}
			bp := bm.Object.(*corev1.Pod)
			if bp.Annotations[InitialEventsAnnotationKey] != "true" || rvOf(t, bp) < maxRV {
				t.Fatalf("bookmark %v rv %s", bp.Annotations, bp.ResourceVersion)
			}
			if err := s.Create(ctx, podKey(cfg, "ns", "new"), pod("ns", "new", nil), nil); err != nil {
				t.Fatal(err)
			}
			expectEvents(t, w, wantEvent{watch.Added, "new"})
		})
		t.Run("legacy rv 0", func(t *testing.T) {
			w, err := s.Watch(ctx, cfg.Prefix+"/ns/", ListOptions{Recursive: true, ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			for i := 0; i < 6; i++ {
				if ev := nextEvent(t, w); ev.Type != watch.Added {
					t.Fatalf("event %d is %s", i, ev.Type)
				}
			}
			setLabel(t, s, podKey(cfg, "ns", "new"), "x", "y")
			expectEvents(t, w, wantEvent{watch.Modified, "new"})
		})
		t.Run("single key", func(t *testing.T) {
			w, err := s.Watch(ctx, podKey(cfg, "ns", "p-00001"), ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			expectEvents(t, w, wantEvent{watch.Added, "p-00001"})
			setLabel(t, s, podKey(cfg, "ns", "p-00002"), "x", "y")
			setLabel(t, s, podKey(cfg, "ns", "p-00001"), "x", "y")
			expectEvents(t, w, wantEvent{watch.Modified, "p-00001"})
		})
	})
}

func TestWatchSelectorTransitions(t *testing.T) {
	impls(t, CacherConfig{}, nil, func(t *testing.T, s Interface, cfg ResourceConfig) {
		ctx := testCtx(t)
		key := podKey(cfg, "ns", "a")
		w, err := s.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0",
			Predicate: SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"color": "red"})}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := s.Create(ctx, podKey(cfg, "ns", "blue"), pod("ns", "blue", map[string]string{"color": "blue"}), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, key, pod("ns", "a", map[string]string{"color": "red"}), nil); err != nil {
			t.Fatal(err)
		}
		setLabel(t, s, key, "color", "blue") // leaves: DELETED
		setLabel(t, s, key, "size", "big")   // still out: nothing
		setLabel(t, s, key, "color", "red")  // enters: ADDED
		setLabel(t, s, key, "size", "small") // stays: MODIFIED
		if err := s.Delete(ctx, key, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		got := expectEvents(t, w, wantEvent{watch.Added, "a"}, wantEvent{watch.Deleted, "a"},
			wantEvent{watch.Added, "a"}, wantEvent{watch.Modified, "a"}, wantEvent{watch.Deleted, "a"})
		if got[1].Labels["color"] != "red" {
			t.Fatalf("a DELETED for leaving the selection carries the last matching state, got %v", got[1].Labels)
		}
	})
}

func TestWatchBookmarks(t *testing.T) {
	impls(t, CacherConfig{BookmarkInterval: 50 * time.Millisecond}, []EtcdOption{WithBookmarkInterval(50 * time.Millisecond)},
		func(t *testing.T, s Interface, cfg ResourceConfig) {
			ctx := testCtx(t)
			a := &corev1.Pod{}
			if err := s.Create(ctx, podKey(cfg, "ns", "a"), pod("ns", "a", nil), a); err != nil {
				t.Fatal(err)
			}
			w, err := s.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: a.ResourceVersion,
				Predicate: SelectionPredicate{AllowWatchBookmarks: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			// Other resources' writes move the revision; an idle watch learns it by bookmark.
			resp, err := testClient.Put(ctx, "/elsewhere", "x")
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				ev := nextEvent(t, w)
				if ev.Type != watch.Bookmark {
					t.Fatalf("got %s", ev.Type)
				}
				if rvOf(t, ev.Object) >= uint64(resp.Header.Revision) {
					return
				}
			}
			t.Fatal("no bookmark reached the current revision")
		})
}

// expectGone accepts both ways Kubernetes reports a too old resourceVersion: an error
// from Watch, or an ERROR event carrying a 410 Status.
func expectGone(t *testing.T, w watch.Interface, err error) {
	t.Helper()
	if err != nil {
		assertStatus(t, err, metav1.StatusReasonExpired, http.StatusGone)
		return
	}
	defer w.Stop()
	ev := nextEvent(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		t.Fatalf("got %s %T", ev.Type, ev.Object)
	}
	assertStatus(t, apierrors.FromObject(st), metav1.StatusReasonExpired, http.StatusGone)
}

func TestWatchTooOld(t *testing.T) {
	t.Run("etcd compacted", func(t *testing.T) {
		s := newTestEtcd(t)
		ctx := testCtx(t)
		a := &corev1.Pod{}
		if err := s.Create(ctx, podKey(s.cfg, "ns", "a"), pod("ns", "a", nil), a); err != nil {
			t.Fatal(err)
		}
		setLabel(t, s, podKey(s.cfg, "ns", "a"), "x", "1")
		setLabel(t, s, podKey(s.cfg, "ns", "a"), "x", "2")
		compactNow(t)
		w, err := s.Watch(ctx, s.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: a.ResourceVersion})
		expectGone(t, w, err)
	})
	t.Run("cacher ring bounded by bytes", func(t *testing.T) {
		c := newTestCacher(t, CacherConfig{EventBufferBytes: 6000})
		ctx := testCtx(t)
		big := func(name string) *corev1.Pod {
			p := pod("ns", name, nil)
			p.Annotations = map[string]string{"pad": strings.Repeat("x", 2500)}
			return p
		}
		z, a, b := &corev1.Pod{}, &corev1.Pod{}, &corev1.Pod{}
		if err := c.Create(ctx, podKey(c.cfg, "ns", "z"), pod("ns", "z", nil), z); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, podKey(c.cfg, "ns", "a"), big("a"), a); err != nil {
			t.Fatal(err)
		}
		// Deleting a costs its last state once (not twice), so z, a and a's deletion fit.
		if err := c.Delete(ctx, podKey(c.cfg, "ns", "a"), &corev1.Pod{}, nil, nil); err != nil {
			t.Fatal(err)
		}
		w, err := c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: z.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, w); ev.Type != watch.Added {
			t.Fatalf("first event after z: %s", ev.Type)
		}
		w.Stop()
		// b pushes the history over 6000 bytes: z's and a's events go, b's stays.
		if err := c.Create(ctx, podKey(c.cfg, "ns", "b"), big("b"), b); err != nil {
			t.Fatal(err)
		}
		// A watch from b waits until the cache has b.
		w, err = c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: b.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		w, err = c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: z.ResourceVersion})
		expectGone(t, w, err)
	})
	t.Run("cacher ring", func(t *testing.T) {
		c := newTestCacher(t, CacherConfig{EventBufferSize: 5})
		ctx := testCtx(t)
		a := &corev1.Pod{}
		if err := c.Create(ctx, podKey(c.cfg, "ns", "a"), pod("ns", "a", nil), a); err != nil {
			t.Fatal(err)
		}
		last := &corev1.Pod{}
		for i := 0; i < 10; i++ {
			if err := c.Create(ctx, podKey(c.cfg, "ns", "b"+strconv.Itoa(i)), pod("ns", "b"+strconv.Itoa(i), nil), last); err != nil {
				t.Fatal(err)
			}
		}
		w, err := c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: a.ResourceVersion})
		expectGone(t, w, err)
		// Recent enough is fine.
		w, err = c.Watch(ctx, c.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: last.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
	})
}

func TestWatchStopsWithContext(t *testing.T) {
	impls(t, CacherConfig{}, nil, func(t *testing.T, s Interface, cfg ResourceConfig) {
		ctx, cancel := context.WithCancel(testCtx(t))
		w, err := s.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case _, ok := <-w.ResultChan():
			for ok {
				_, ok = <-w.ResultChan()
			}
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not end with its context")
		}
		w.Stop()
	})
}

// TestWatchListUnderWrites starts a watch-list while pods are being created: every pod is
// seen exactly once, initial events are at or below the bookmark's revision and later
// events above it, in order.
func TestWatchListUnderWrites(t *testing.T) {
	impls(t, CacherConfig{}, nil, func(t *testing.T, s Interface, cfg ResourceConfig) {
		ctx := testCtx(t)
		const n = 200
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("p-%05d", i)
				if err := s.Create(ctx, podKey(cfg, "ns", name), pod("ns", name, nil), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		yes := true
		w, err := s.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, SendInitialEvents: &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			Predicate:            SelectionPredicate{AllowWatchBookmarks: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		seen := map[string]bool{}
		var bookmark, last uint64
		for len(seen) < n {
			ev := nextEvent(t, w)
			switch ev.Type {
			case watch.Bookmark:
				if bookmark == 0 {
					bookmark = rvOf(t, ev.Object)
					last = bookmark
				}
				continue
			case watch.Added:
			default:
				t.Fatalf("unexpected %s", ev.Type)
			}
			p := unwrap(ev.Object).(*corev1.Pod)
			if seen[p.Name] {
				t.Fatalf("%s seen twice", p.Name)
			}
			seen[p.Name] = true
			rv := rvOf(t, p)
			if bookmark != 0 {
				if rv <= last {
					t.Fatalf("event at %d after %d", rv, last)
				}
				last = rv
			}
		}
		if bookmark == 0 {
			t.Fatal("no initial-events-end bookmark")
		}
		<-done
	})
}
