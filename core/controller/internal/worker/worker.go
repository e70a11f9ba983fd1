// Package worker is the loop every queue-driven controller runs: wait for the informers,
// then pull keys with N workers until the context ends, requeueing failed keys with
// rate limiting.
package worker

import (
	"context"
	"log/slog"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Run syncs keys from queue with workers goroutines until ctx ends, then shuts the queue
// down and waits for the workers. kind names the objects in log lines.
func Run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int,
	synced []cache.InformerSynced, sync func(ctx context.Context, key string) error, log *slog.Logger, kind string) {
	defer utilruntime.HandleCrash()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		queue.ShutDown()
		return
	}
	log.Info("started", "workers", workers)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, queue, sync, log, kind) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	for range workers {
		<-done
	}
}

func processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, log *slog.Logger, kind string) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			log.Warn("sync failed, requeueing", kind, key, "err", err)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// RunRequeueing is Run for controllers whose sync also says when to look at a key again
// (a schedule, a deadline): a positive delay after a successful sync requeues the key
// then.
func RunRequeueing(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int,
	synced []cache.InformerSynced, sync func(ctx context.Context, key string) (time.Duration, error), log *slog.Logger, kind string) {
	Run(ctx, queue, workers, synced, func(ctx context.Context, key string) error {
		after, err := sync(ctx, key)
		if err == nil && after > 0 {
			queue.AddAfter(key, after)
		}
		return err
	}, log, kind)
}
