package storage

import (
	"context"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// gizmoConfig is a custom resource (unstructured objects) under a prefix of its own.
func gizmoConfig(tb testing.TB) ResourceConfig {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(tb.Name())
	return ResourceConfig{
		GroupResource: schema.GroupResource{Group: "example.com", Resource: "gizmos"},
		Prefix:        fmt.Sprintf("/t%d-%s/example.com/gizmos", prefixSeq.Add(1), name),
		NewFunc:       func() runtime.Object { return &unstructured.Unstructured{} },
		NewListFunc:   func() runtime.Object { return &unstructured.UnstructuredList{} },
		Codec:         NewCodec(scheme.Scheme),
	}
}

func gizmo(name string, size int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": name, "namespace": "ns", "labels": map[string]any{"app": "gizmo"}},
		"spec":     map[string]any{"data": strings.Repeat("x", size), "replicas": int64(3)},
	}}
}

// readyGizmoCacher starts a watch cache of gizmos, stopped when the test ends.
func readyGizmoCacher(ctx context.Context, tb testing.TB) (ResourceConfig, *Cacher) {
	tb.Helper()
	cfg := gizmoConfig(tb)
	c := NewCacher(NewEtcd(testClient, cfg), CacherConfig{})
	tb.Cleanup(c.Stop)
	if err := c.Ready(ctx); err != nil {
		tb.Fatal(err)
	}
	return cfg, c
}

// forgetDecoded runs the collector until no cached gizmo keeps its decoded form, which is
// what a server holding many objects that nobody reads looks like.
func forgetDecoded(t *testing.T, c *Cacher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		goruntime.GC()
		live := 0
		c.mu.RLock()
		c.tree.Ascend(func(it *cacheItem) bool {
			if it.obj.stored == nil {
				t.Errorf("%s: cached decoded, want stored bytes", it.key)
			} else if it.obj.stored.live() != nil {
				live++
			}
			return true
		})
		c.mu.RUnlock()
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d cached objects still decoded after collections", live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCacherKeepsUnstructuredAsStoredBytes checks that custom objects, cached as their
// stored bytes, are served the same as decoded ones: get, list, watch (initial events,
// changes, deletion), updates that start from the cache, from many readers at once.
func TestCacherKeepsUnstructuredAsStoredBytes(t *testing.T) {
	ctx := testCtx(t)
	cfg, c := readyGizmoCacher(ctx, t)
	key := func(name string) string { return cfg.Prefix + "/ns/" + name }
	want := map[string]*unstructured.Unstructured{}
	for i := range 20 {
		name := fmt.Sprintf("g-%02d", i)
		out := &unstructured.Unstructured{}
		if err := c.Create(ctx, key(name), gizmo(name, 100+i), out); err != nil {
			t.Fatal(err)
		}
		want[name] = out
	}
	last := want["g-19"].GetResourceVersion()
	list := &unstructured.UnstructuredList{}
	if err := c.GetList(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: last,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, list); err != nil {
		t.Fatal(err)
	}
	forgetDecoded(t, c)

	// Many readers of forgotten objects at once: each gets the written object.
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(want))
	for range 8 {
		for name, w := range want {
			wg.Go(func() {
				got := &unstructured.Unstructured{}
				if err := c.Get(ctx, key(name), GetOptions{ResourceVersion: "0"}, got); err != nil {
					errs <- err
					return
				}
				if !equality.Semantic.DeepEqual(got.Object, w.Object) {
					errs <- fmt.Errorf("get %s: %v, want %v", name, got.Object, w.Object)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	forgetDecoded(t, c)
	list = &unstructured.UnstructuredList{}
	if err := c.GetList(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0",
		Predicate: SelectionPredicate{Limit: 5}}, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 || list.GetContinue() == "" {
		t.Fatalf("paged list: %d items, continue %q; want 5 and a token", len(list.Items), list.GetContinue())
	}
	for _, it := range list.Items {
		if !equality.Semantic.DeepEqual(it.Object, want[it.GetName()].Object) {
			t.Errorf("list item %s: %v, want %v", it.GetName(), it.Object, want[it.GetName()].Object)
		}
	}

	forgetDecoded(t, c)
	w, err := c.Watch(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() watch.Event { return nextEvent(t, w) }
	object := func(ev watch.Event) *unstructured.Unstructured {
		t.Helper()
		if _, ok := ev.Object.(*CachingObject); !ok {
			t.Fatalf("event object %T, want the cache's shared object", ev.Object)
		}
		return unwrap(ev.Object).(*unstructured.Unstructured)
	}
	for range want {
		ev := next()
		got := object(ev)
		if ev.Type != watch.Added || !equality.Semantic.DeepEqual(got.Object, want[got.GetName()].Object) {
			t.Fatalf("initial event %s %v, want Added %v", ev.Type, got.Object, want[got.GetName()].Object)
		}
	}

	// An update starts from the cached state (its stored bytes), then is watched.
	forgetDecoded(t, c)
	updated := &unstructured.Unstructured{}
	err = c.GuaranteedUpdate(ctx, key("g-03"), updated, false, nil, func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
		u := in.(*unstructured.Unstructured)
		if !equality.Semantic.DeepEqual(u.Object, want["g-03"].Object) {
			return nil, fmt.Errorf("update started from %v, want %v", u.Object, want["g-03"].Object)
		}
		if err := unstructured.SetNestedField(u.Object, int64(5), "spec", "replicas"); err != nil {
			return nil, err
		}
		return u, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Type != watch.Modified || !equality.Semantic.DeepEqual(object(ev).Object, updated.Object) {
		t.Fatalf("event %s %v, want Modified %v", ev.Type, object(ev).Object, updated.Object)
	}
	// An update that changes nothing writes nothing: the stored bytes are the comparison.
	same := &unstructured.Unstructured{}
	err = c.GuaranteedUpdate(ctx, key("g-03"), same, false, nil, func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
		return in, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if same.GetResourceVersion() != updated.GetResourceVersion() {
		t.Errorf("no-op update wrote revision %s, want %s kept", same.GetResourceVersion(), updated.GetResourceVersion())
	}

	forgetDecoded(t, c)
	if err := c.Delete(ctx, key("g-04"), &unstructured.Unstructured{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	ev := next()
	got := object(ev)
	if ev.Type != watch.Deleted || got.GetName() != "g-04" || !equality.Semantic.DeepEqual(got.Object["spec"], want["g-04"].Object["spec"]) {
		t.Fatalf("event %s %v, want Deleted g-04", ev.Type, got.Object)
	}
}

// BenchmarkCacherUnstructuredList is a full list of 10,000 1 KiB custom objects from the
// watch cache after the decoded forms were collected: the price of keeping bytes.
func BenchmarkCacherUnstructuredList(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, c := readyGizmoCacher(ctx, b)
	const n = 10000
	sem := make(chan struct{}, 32)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			name := fmt.Sprintf("g-%05d", i)
			errs <- c.Create(ctx, cfg.Prefix+"/ns/"+name, gizmo(name, 1024), nil)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		goruntime.GC()
		list := &unstructured.UnstructuredList{}
		if err := c.GetList(ctx, cfg.Prefix+"/", ListOptions{Recursive: true}, list); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) != n {
			b.Fatalf("%d items, want %d", len(list.Items), n)
		}
	}
}

// TestCacherTakesCreatedObjects: a custom object the cache's own Create wrote is cached
// as that object (a copy), not decoded again from its bytes, and is exactly what decoding
// its bytes gives; nothing is kept once the events are applied or the write failed. A
// caller that changes its objects after Create gets a deep copy taken; one that said it
// only reads them (WithResultKept) a shallow one.
func TestCacherTakesCreatedObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		kept bool
	}{{"caller changes its objects", false}, {"caller only reads them", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cfg := gizmoConfig(t)
			store := NewEtcd(testClient, cfg)
			c := NewCacher(store, CacherConfig{})
			t.Cleanup(c.Stop)
			if err := c.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			createCtx := ctx
			if tc.kept {
				createCtx = WithResultKept(ctx)
			}
			const n = 20
			outs := map[string]*unstructured.Unstructured{}
			answers := map[string]map[string]any{}
			var last uint64
			for i := range n {
				name := fmt.Sprintf("g%02d", i)
				obj, out := gizmo(name, 10), &unstructured.Unstructured{}
				if i%2 == 1 {
					// The registry's store answers with the object it wrote (out is obj): a
					// number JSON reads back as an integer and an empty map are turned in place.
					obj.Object["spec"].(map[string]any)["ratio"] = 2.0
					obj.Object["spec"].(map[string]any)["none"] = map[string]any(nil)
					out = obj
				}
				key := cfg.Prefix + "/ns/" + name
				if err := c.Create(createCtx, key, obj, out); err != nil {
					t.Fatal(err)
				}
				outs[name] = out
				answers[name] = runtime.DeepCopyJSON(out.Object)
				rev, err := strconv.ParseUint(out.GetResourceVersion(), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				last = rev
				if !tc.kept {
					// The caller owns out: changing it must not reach the cache.
					out.SetLabels(map[string]string{"changed": "by-caller"})
					obj.Object["spec"].(map[string]any)["changed"] = true
				}
			}
			if ok, err := c.waitFresh(ctx, last); err != nil || !ok {
				t.Fatalf("the cache never reached revision %d: %v", last, err)
			}
			for name := range outs {
				key := cfg.Prefix + "/ns/" + name
				cached := &unstructured.Unstructured{}
				if err := c.Get(ctx, key, GetOptions{ResourceVersion: "0"}, cached); err != nil {
					t.Fatal(err)
				}
				fromEtcd := &unstructured.Unstructured{}
				if err := store.Get(ctx, key, GetOptions{}, fromEtcd); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(cached.Object, fromEtcd.Object) {
					t.Errorf("%s: cached %v\nstored %v", name, cached.Object, fromEtcd.Object)
				}
				if !reflect.DeepEqual(answers[name], fromEtcd.Object) {
					t.Errorf("%s: answered %v\nstored %v", name, answers[name], fromEtcd.Object)
				}
			}
			// Writing a key again fails and keeps nothing for it. (Done once the first
			// writes' events are in: a second write of a key whose first write's event is
			// still to come replaces what was kept for it, and that event decodes.)
			for name := range outs {
				if err := c.Create(createCtx, cfg.Prefix+"/ns/"+name, gizmo(name, 10), &unstructured.Unstructured{}); !apierrors.IsAlreadyExists(err) {
					t.Fatalf("second create of %s: %v, want AlreadyExists", name, err)
				}
			}
			c.createdMu.Lock()
			left := len(c.created)
			c.createdMu.Unlock()
			if left != 0 {
				t.Errorf("%d created objects kept after their events or failed writes", left)
			}
			// Every object whose bytes decode to exactly its content (the even ones: the
			// odd ones hold a float that reads back as an integer) was kept before its
			// write, so its event found it.
			if got := c.taken.Load(); got != n/2 {
				t.Errorf("%d created objects taken by their events, want %d", got, n/2)
			}
		})
	}
}

func TestLeadingAPIVersion(t *testing.T) {
	for _, tc := range []struct {
		data   string
		want   string
		wantOK bool
	}{
		{`{"apiVersion":"bench.example.com/v1","kind":"Gizmo"}`, "bench.example.com/v1", true},
		{`{"apiVersion":"v1"}`, "v1", true},
		{`{"apiVersion":""}`, "", true},
		{`{"kind":"Gizmo","apiVersion":"v1"}`, "", false},
		{`{ "apiVersion":"v1"}`, "", false},
		{`{"apiVersion":"a\"b","kind":"K"}`, "", false},
		{`{"apiVersion":"a\u00e9","kind":"K"}`, "", false},
		{"{\"apiVersion\":\"é/v1\",\"kind\":\"K\"}", "", false},
		{`{"apiVersion":"v1"x`, "", false},
		{`{"apiVersion":"v1`, "", false},
		{`{"apiVersion":1}`, "", false},
		{``, "", false},
	} {
		got, ok := leadingAPIVersion([]byte(tc.data))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("leadingAPIVersion(%s) = %q, %v; want %q, %v", tc.data, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestStoredAPIVersionDecodesNothing checks that the version of a cached custom object is
// read from its stored bytes: a list that splices the bytes must not decode its items.
func TestStoredAPIVersionDecodesNothing(t *testing.T) {
	ctx := testCtx(t)
	cfg, c := readyGizmoCacher(ctx, t)
	var last string
	for i := range 5 {
		name := fmt.Sprintf("v-%02d", i)
		out := &unstructured.Unstructured{}
		if err := c.Create(ctx, cfg.Prefix+"/ns/"+name, gizmo(name, 50), out); err != nil {
			t.Fatal(err)
		}
		last = out.GetResourceVersion()
	}
	list := &unstructured.UnstructuredList{}
	if err := c.GetList(ctx, cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: last,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, list); err != nil {
		t.Fatal(err)
	}
	forgetDecoded(t, c)
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	c.tree.Ascend(func(it *cacheItem) bool {
		if !strings.HasPrefix(it.key, cfg.Prefix+"/ns/v-") {
			return true
		}
		n++
		got, ok := it.obj.StoredAPIVersion()
		if want := gizmo("x", 1).GetAPIVersion(); !ok || got != want {
			t.Errorf("%s: StoredAPIVersion() = %q, %v; want %q, true", it.key, got, ok, want)
		}
		if it.obj.stored.live() != nil {
			t.Errorf("%s: reading the version decoded the object", it.key)
		}
		return true
	})
	if n != 5 {
		t.Fatalf("%d cached objects, want 5", n)
	}
}
