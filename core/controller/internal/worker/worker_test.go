package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func TestRunRequeuesFailuresAndStops(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	sync := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "flaky" && calls[key] < 3 {
			return errors.New("not yet")
		}
		if calls["flaky"] == 3 && calls["ok"] == 1 {
			close(done)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Run(ctx, q, 2, []cache.InformerSynced{func() bool { return true }}, sync, slog.New(slog.NewTextHandler(io.Discard, nil)), "thing")
	}()
	q.Add("ok")
	q.Add("flaky")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("keys not synced: %v", calls)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}
	if !q.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}
