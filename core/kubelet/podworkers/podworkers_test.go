package podworkers

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(uid, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
}

func TestSerializedLatestWins(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[types.UID][]string{}
	active := map[types.UID]int{}
	overlap := false
	started := make(chan struct{}, 10)
	w := New(ctx, func(_ context.Context, p *corev1.Pod, _ bool) (time.Duration, bool) {
		mu.Lock()
		active[p.UID]++
		if active[p.UID] > 1 {
			overlap = true
		}
		seen[p.UID] = append(seen[p.UID], p.ResourceVersion)
		mu.Unlock()
		started <- struct{}{}
		if p.ResourceVersion == "1" {
			<-release
		}
		mu.Lock()
		active[p.UID]--
		mu.Unlock()
		return time.Hour, false
	}, time.Hour)
	w.Update(pod("a", "1"))
	<-started
	// While version 1 syncs, 2, 3 and 4 arrive: only the latest is synced next.
	w.Update(pod("a", "2"))
	w.Update(pod("a", "3"))
	w.Update(pod("a", "4"))
	w.Update(pod("b", "1"))
	close(release)
	deadline := time.After(10 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatal("syncs did not happen")
		}
	}
	cancel()
	w.Wait()
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Error("two syncs of one pod ran at once")
	}
	if got := seen["a"]; len(got) != 2 || got[0] != "1" || got[1] != "4" {
		t.Errorf("pod a synced %v, want [1 4]", got)
	}
	if got := seen["b"]; len(got) != 1 {
		t.Errorf("pod b synced %v", got)
	}
}

func TestRemoveFinishesWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	removed := make(chan struct{})
	w := New(ctx, func(_ context.Context, p *corev1.Pod, gone bool) (time.Duration, bool) {
		if gone {
			close(removed)
			return 0, true
		}
		return 0, false
	}, time.Hour)
	w.Update(pod("a", "1"))
	w.Remove(pod("a", "1"))
	select {
	case <-removed:
	case <-time.After(10 * time.Second):
		t.Fatal("removal not synced")
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.Known("a") {
		if time.Now().After(deadline) {
			t.Fatal("worker still known after finishing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	w.Wait()
}

func TestRequeueAfter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan time.Time, 10)
	w := New(ctx, func(context.Context, *corev1.Pod, bool) (time.Duration, bool) {
		calls <- time.Now()
		return 50 * time.Millisecond, false
	}, time.Hour)
	w.Update(pod("a", "1"))
	first := <-calls
	select {
	case second := <-calls:
		if d := second.Sub(first); d < 40*time.Millisecond {
			t.Errorf("requeued after %s, want ~50ms", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no requeue")
	}
	cancel()
	w.Wait()
}
