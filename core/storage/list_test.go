package storage

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// listAll pages through key and returns the names seen, failing on duplicates.
func listAll(t *testing.T, s Interface, key string, pred SelectionPredicate) ([]string, []*corev1.PodList) {
	t.Helper()
	ctx := testCtx(t)
	seen := map[string]bool{}
	var names []string
	var pages []*corev1.PodList
	for {
		list := &corev1.PodList{}
		if err := s.GetList(ctx, key, ListOptions{Recursive: true, Predicate: pred}, list); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, list)
		for _, p := range list.Items {
			if seen[p.Name] {
				t.Fatalf("%s listed twice", p.Name)
			}
			seen[p.Name] = true
			names = append(names, p.Name)
		}
		if list.Continue == "" {
			return names, pages
		}
		pred.Continue = list.Continue
	}
}

func TestPaging(t *testing.T) {
	s := newTestEtcd(t)
	n := 2000
	createPods(t, s, s.cfg, "ns", n)
	// Noise under a sibling prefix must not leak into the list.
	createPods(t, s, s.cfg, "ns2", 10)
	key := s.cfg.Prefix + "/ns/"

	t.Run("all", func(t *testing.T) {
		names, pages := listAll(t, s, key, SelectionPredicate{Limit: 100})
		if len(names) != n || len(pages) != 20 {
			t.Fatalf("%d names in %d pages", len(names), len(pages))
		}
		for i, name := range names {
			if want := fmt.Sprintf("p-%05d", i); name != want {
				t.Fatalf("item %d = %s, want %s (lists are key-ordered)", i, name, want)
			}
		}
		first := pages[0]
		if first.RemainingItemCount == nil || *first.RemainingItemCount != int64(n-100) {
			t.Fatalf("remainingItemCount %v", first.RemainingItemCount)
		}
		for _, p := range pages {
			if p.ResourceVersion != first.ResourceVersion {
				t.Fatalf("pages read at different revisions: %s vs %s", p.ResourceVersion, first.ResourceVersion)
			}
		}
	})
	t.Run("label selector", func(t *testing.T) {
		sel := labels.SelectorFromSet(labels.Set{"parity": "odd"})
		names, pages := listAll(t, s, key, SelectionPredicate{Limit: 100, Label: sel})
		if len(names) != n/2 {
			t.Fatalf("%d names", len(names))
		}
		for _, p := range pages[:len(pages)-1] {
			if len(p.Items) != 100 {
				t.Fatalf("a filtered page has %d items, want 100", len(p.Items))
			}
			if p.RemainingItemCount != nil {
				t.Fatal("remainingItemCount must not be set with a selector")
			}
		}
		// With CountRemaining the objects the selector hides are counted too: the first
		// page's 100 odd ones come from the first 200 pods, and all later pods count.
		_, pages = listAll(t, s, key, SelectionPredicate{Limit: 100, Label: sel, CountRemaining: true})
		if r := pages[0].RemainingItemCount; r == nil || *r != int64(n-200) {
			t.Fatalf("remainingItemCount %v with CountRemaining, want %d", r, n-200)
		}
	})
	t.Run("field selector", func(t *testing.T) {
		names, _ := listAll(t, s, s.cfg.Prefix+"/", SelectionPredicate{
			Field: fields.OneTermEqualSelector("metadata.namespace", "ns2")})
		if len(names) != 10 {
			t.Fatalf("%d names", len(names))
		}
	})
	t.Run("exact and too large", func(t *testing.T) {
		ctx := testCtx(t)
		list := &corev1.PodList{}
		if err := s.GetList(ctx, key, ListOptions{Recursive: true}, list); err != nil {
			t.Fatal(err)
		}
		rv := list.ResourceVersion
		if err := s.Create(ctx, podKey(s.cfg, "ns", "zz-late"), pod("ns", "zz-late", nil), nil); err != nil {
			t.Fatal(err)
		}
		old := &corev1.PodList{}
		opts := ListOptions{Recursive: true, ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
			Predicate: SelectionPredicate{Limit: 500}}
		names := 0
		for {
			if err := s.GetList(ctx, key, opts, old); err != nil {
				t.Fatal(err)
			}
			names += len(old.Items)
			if old.ResourceVersion != rv {
				t.Fatalf("exact list at %s, want %s", old.ResourceVersion, rv)
			}
			if old.Continue == "" {
				break
			}
			opts = ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 500, Continue: old.Continue}}
		}
		if names != n {
			t.Fatalf("exact list saw %d, want %d", names, n)
		}
		cur, _ := strconv.ParseUint(rv, 10, 64)
		err := s.GetList(ctx, key, ListOptions{Recursive: true, ResourceVersion: strconv.FormatUint(cur+1000000, 10),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, &corev1.PodList{})
		assertStatus(t, err, metav1.StatusReasonTimeout, http.StatusGatewayTimeout)
		if c := err.(interface{ Status() metav1.Status }).Status().Details.Causes; len(c) == 0 ||
			c[0].Type != metav1.CauseTypeResourceVersionTooLarge {
			t.Fatalf("causes %v", c)
		}
	})
	t.Run("continue after compaction", func(t *testing.T) {
		ctx := testCtx(t)
		first := &corev1.PodList{}
		if err := s.GetList(ctx, key, ListOptions{Recursive: true, Predicate: SelectionPredicate{Limit: 100}}, first); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, podKey(s.cfg, "ns", "zz-later"), pod("ns", "zz-later", nil), nil); err != nil {
			t.Fatal(err)
		}
		compactNow(t)
		err := s.GetList(ctx, key, ListOptions{Recursive: true,
			Predicate: SelectionPredicate{Limit: 100, Continue: first.Continue}}, &corev1.PodList{})
		assertStatus(t, err, metav1.StatusReasonExpired, http.StatusGone)
		// The 410 carries a token that resumes at the same key at the latest revision.
		tok := err.(interface{ Status() metav1.Status }).Status().Continue
		if tok == "" {
			t.Fatal("no inconsistent continue token in the 410")
		}
		second := &corev1.PodList{}
		if err := s.GetList(ctx, key, ListOptions{Recursive: true,
			Predicate: SelectionPredicate{Limit: 100, Continue: tok}}, second); err != nil {
			t.Fatal(err)
		}
		if len(second.Items) != 100 || second.Items[0].Name != "p-00100" || second.ResourceVersion == first.ResourceVersion {
			t.Fatalf("inconsistent page: %d items from %s at %s", len(second.Items), second.Items[0].Name, second.ResourceVersion)
		}
		// n pods and zz-late, zz-later: what follows the first two pages.
		if r := second.RemainingItemCount; r == nil || *r != int64(n+2-200) {
			t.Fatalf("remainingItemCount %v, want %d", r, n+2-200)
		}
		third := &corev1.PodList{}
		if err := s.GetList(ctx, key, ListOptions{Recursive: true,
			Predicate: SelectionPredicate{Limit: 100, Continue: second.Continue}}, third); err != nil {
			t.Fatal(err)
		}
		if third.ResourceVersion != second.ResourceVersion || third.Items[0].Name != "p-00200" {
			t.Fatalf("page after the inconsistent one at %s from %s", third.ResourceVersion, third.Items[0].Name)
		}
		err = s.GetList(ctx, key, ListOptions{Recursive: true, ResourceVersion: first.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact}, &corev1.PodList{})
		assertStatus(t, err, metav1.StatusReasonExpired, http.StatusGone)
	})
	t.Run("bad continue", func(t *testing.T) {
		for _, tok := range []string{"garbage!", mustContinue(t, "p-00001", key, 0), mustContinue(t, "p-00001", key, -2)} {
			err := s.GetList(testCtx(t), key, ListOptions{Recursive: true,
				Predicate: SelectionPredicate{Limit: 10, Continue: tok}}, &corev1.PodList{})
			assertStatus(t, err, metav1.StatusReasonBadRequest, http.StatusBadRequest)
		}
	})
}

func mustContinue(t *testing.T, name, keyPrefix string, rev int64) string {
	t.Helper()
	tok, err := encodeContinue(keyPrefix+name, keyPrefix, rev)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// compactNow compacts etcd to its current revision.
func compactNow(t *testing.T) int64 {
	t.Helper()
	ctx := testCtx(t)
	resp, err := testClient.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testClient.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
