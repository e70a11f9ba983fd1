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
	chunk := ChunkSize(pieces)
	p.Blocks(ctx, pieces, chunk, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}

// AtMost returns a parallelizer with at most n workers.
func (p Parallelizer) AtMost(n int) Parallelizer {
	if p.parallelism <= 0 || p.parallelism > n {
		p.parallelism = max(n, 1)
	}
	return p
}

// ChunkSize is how many of pieces one worker takes at a time: about sqrt(pieces), which
// amortizes the shared counter as Kubernetes does, but at most 16, so that a walk that
// stops early (Filter stops at enough feasible nodes) visits the nodes nearly in order
// instead of starting 16 chunks of 71 nodes at once at 5,000 nodes.
func ChunkSize(pieces int) int {
	chunk := 1
	for chunk*chunk < pieces && chunk < 16 {
		chunk++
	}
	return chunk
}

// Blocks calls fn(lo, hi) for the consecutive blocks [lo, hi) of size (the last may be
// shorter) that cover [0, n), handing them out in order to up to parallelism goroutines,
// so that a walk cancelled early has visited nearly a prefix. It returns when all are
// done or ctx is cancelled (blocks not yet started are then skipped); no goroutine
// outlives the call.
func (p Parallelizer) Blocks(ctx context.Context, n, size int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	size = max(size, 1)
	blocks := (n + size - 1) / size
	workers := p.parallelism
	if workers <= 0 {
		workers = DefaultParallelism
	}
	workers = min(workers, blocks)
	run := func(b int) { fn(b*size, min((b+1)*size, n)) }
	if workers == 1 {
		for b := 0; b < blocks && ctx.Err() == nil; b++ {
			run(b)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer wg.Done()
			// A block handed out is always run, so the blocks run are a prefix but
			// for the ones in flight when ctx was cancelled.
			for ctx.Err() == nil {
				b := int(next.Add(1) - 1)
				if b >= blocks {
					return
				}
				run(b)
			}
		}()
	}
	wg.Wait()
}
