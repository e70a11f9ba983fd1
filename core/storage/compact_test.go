package storage

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCompactorSteps(t *testing.T) {
	ctx := testCtx(t)
	// Start from whatever earlier tests left in compact_rev_key: adopt its version.
	if _, err := testClient.Delete(ctx, CompactRevKey); err != nil {
		t.Fatal(err)
	}
	s := newTestEtcd(t)
	a, b := NewCompactor(testClient, 0, nil), NewCompactor(testClient, 0, nil)
	first := &corev1.Pod{}
	if err := s.Create(ctx, podKey(s.cfg, "ns", "a"), pod("ns", "a", nil), first); err != nil {
		t.Fatal(err)
	}
	// Round 1 only records the revision.
	if rev, err := a.Step(ctx); err != nil || rev != 0 {
		t.Fatalf("round 1: %d %v", rev, err)
	}
	// The other server in the same round defers to the first.
	if rev, err := b.Step(ctx); err != nil || rev != 0 {
		t.Fatalf("round 1, second server: %d %v", rev, err)
	}
	setLabel(t, s, podKey(s.cfg, "ns", "a"), "x", "y")
	// Round 2 compacts to what round 1 saw; again one server only.
	rev, err := a.Step(ctx)
	if err != nil || rev < 1 {
		t.Fatalf("round 2: %d %v", rev, err)
	}
	if r, err := b.Step(ctx); err != nil || r != 0 {
		t.Fatalf("round 2, second server compacted too: %d %v", r, err)
	}
	err = s.GetList(ctx, s.cfg.Prefix+"/", ListOptions{Recursive: true, ResourceVersion: first.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchExact}, &corev1.PodList{})
	assertStatus(t, err, metav1.StatusReasonExpired, http.StatusGone)
	// The latest state is intact.
	if err := s.Get(ctx, podKey(s.cfg, "ns", "a"), GetOptions{}, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
}

func TestCompactorLoopStops(t *testing.T) {
	c := NewCompactor(testClient, 0, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	c.Start(ctx)
	c.Stop()
}
