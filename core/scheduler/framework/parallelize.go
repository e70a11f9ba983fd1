package framework

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultParallelism is Kubernetes' default parallelism.
const DefaultParallelism = 16

// Parallelizer runs pieces of work on a bounded number of goroutines.
type Parallelizer struct {
	parallelism int
}

// NewParallelizer returns a parallelizer with the given worker count (≤0 = default).
func NewParallelizer(p int) Parallelizer {
	if p <= 0 {
		p = DefaultParallelism
	}
	return Parallelizer{parallelism: p}
}

// Until calls fn(i) for i in [0, pieces) on up to parallelism goroutines, in chunks, and
// returns when all are done or ctx is cancelled (remaining pieces are then skipped).
// No goroutine outlives the call.
func (p Parallelizer) Until(ctx context.Context, pieces int, fn func(i int)) {
	if pieces <= 0 {
		return
	}
	workers := p.parallelism
	if workers <= 0 {
		workers = DefaultParallelism
	}
	// Chunks of about sqrt(pieces) amortize the atomic counter, as Kubernetes does.
	chunk := 1
	for chunk*chunk < pieces {
		chunk++
	}
	chunks := (pieces + chunk - 1) / chunk
	if workers > chunks {
		workers = chunks
	}
	if workers == 1 {
		for i := 0; i < pieces; i++ {
			if ctx.Err() != nil {
				return
			}
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer wg.Done()
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks || ctx.Err() != nil {
					return
				}
				end := min((c+1)*chunk, pieces)
				for i := c * chunk; i < end; i++ {
					fn(i)
				}
			}
		}()
	}
	wg.Wait()
}
