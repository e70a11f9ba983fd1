// Package slowstart creates objects the way Kubernetes' workload controllers do: in
// batches that double while they succeed, so that a request doomed to fail (a quota, an
// admission rejection) is sent once rather than once per object.
package slowstart

import (
	"context"
	"sync"
)

// maxParallelCreates caps concurrent creations per sync: API servers answer 429 beyond
// their mutating in-flight limit (200 by default, as kube-apiserver), and client-go then
// waits a full Retry-After second, which costs far more than queueing the calls here.
const maxParallelCreates = 64

// Batch calls fn count times in batches of 1, 2, 4, … up to count, in parallel within
// a batch (at most maxParallelCreates at once), and stops at the first batch with an error, so
// a systematic failure (a quota, an admission rejection) costs one call rather than count. It
// returns how many calls succeeded and the first error.
func Batch(ctx context.Context, count, initialBatch int, fn func(context.Context) error) (int, error) {
	sem := make(chan struct{}, maxParallelCreates)
	remaining := count
	successes := 0
	for batch := min(remaining, initialBatch); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := fn(ctx); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		close(errCh)
		successes += batch - len(errCh)
		if err, failed := <-errCh; failed {
			return successes, err
		}
		remaining -= batch
	}
	return successes, nil
}
