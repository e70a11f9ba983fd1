package storage

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestCachedItems checks that a paged list served from the cache hands over the shared
// objects in order (and the same pages as without), and that etcd-served lists do not.
func TestCachedItems(t *testing.T) {
	c := newTestCacher(t, CacherConfig{FreshnessTimeout: 2 * time.Second})
	ctx := testCtx(t)
	createPods(t, c, c.cfg, "ns", 25)
	opts := ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 10}}
	var names []string
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		plain := &corev1.PodList{}
		if err := c.GetList(ctx, c.cfg.Prefix+"/ns/", opts, plain); err != nil {
			t.Fatal(err)
		}
		ci := &CachedItems{}
		list := &corev1.PodList{}
		if err := c.GetList(WithCachedItems(ctx, ci), c.cfg.Prefix+"/ns/", opts, list); err != nil {
			t.Fatal(err)
		}
		if !ci.Served || len(list.Items) != 0 || len(ci.Items) != len(plain.Items) {
			t.Fatalf("served %v, %d list items, %d cached, want %d cached", ci.Served, len(list.Items), len(ci.Items), len(plain.Items))
		}
		if list.ResourceVersion != plain.ResourceVersion || list.Continue != plain.Continue {
			t.Fatalf("list meta %+v, want %+v", list.ListMeta, plain.ListMeta)
		}
		for i, co := range ci.Items {
			p := co.Shared().(*corev1.Pod)
			if p.Name != plain.Items[i].Name || p.ResourceVersion != plain.Items[i].ResourceVersion {
				t.Fatalf("item %d: %s@%s, want %s@%s", i, p.Name, p.ResourceVersion, plain.Items[i].Name, plain.Items[i].ResourceVersion)
			}
			names = append(names, p.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Predicate.Continue = list.Continue
	}
	if len(names) != 25 {
		t.Fatalf("listed %d pods, want 25", len(names))
	}
	// Exact revisions are read from etcd: the items are in the list as usual.
	ci := &CachedItems{}
	list := &corev1.PodList{}
	rv, err := c.CurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exact := ListOptions{Recursive: true, ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}
	if err := c.GetList(WithCachedItems(ctx, ci), c.cfg.Prefix+"/ns/", exact, list); err != nil {
		t.Fatal(err)
	}
	if ci.Served || len(list.Items) != 25 {
		t.Fatalf("exact list: served %v with %d items, want etcd's 25", ci.Served, len(list.Items))
	}
}

// TestCachingObjectEncoders checks concurrent encodes under several encoder ids: each id is
// encoded once, gets its own bytes, and Encoded reports only finished encodings.
func TestCachingObjectEncoders(t *testing.T) {
	co := NewCachingObject(pod("ns", "a", nil))
	var calls [3]atomic.Int32
	ids := []runtime.Identifier{"first", "second", "third"}
	if _, ok := co.Encoded("first"); ok {
		t.Fatal("Encoded before any encode")
	}
	var wg sync.WaitGroup
	for g := 0; g < 30; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			i := g % len(ids)
			var buf bytes.Buffer
			err := co.CacheEncode(ids[i], func(runtime.Object, io.Writer) error {
				calls[i].Add(1)
				return nil
			}, &buf)
			if err != nil {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	for i, id := range ids {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("%s encoded %d times, want 1", id, n)
		}
		if _, ok := co.Encoded(id); !ok {
			t.Errorf("%s: no encoding remembered", id)
		}
	}
	if err := co.CacheEncode("fourth", func(_ runtime.Object, w io.Writer) error {
		_, err := w.Write([]byte("4"))
		return err
	}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, ok := co.Encoded("fourth"); !ok || string(b) != "4" {
		t.Fatalf("fourth: %q %v", b, ok)
	}
}
