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
	// Chunks of about sqrt(pieces) amortize the atomic counter, as Kubernetes does, but
	// of at most 16: a walk that stops early (Filter stops at enough feasible nodes) then
	// visits the nodes nearly in order instead of starting 16 chunks of 71 nodes at once
	// at 5,000 nodes, which is what lets a batching plugin (a WASM Filter judges a window
	// of nodes per call) judge the nodes the walk needs rather than twice as many
	// (FilterWalk5000Nodes: 315 → 231 µs per pod).
	chunk := 1
	for chunk*chunk < pieces && chunk < 16 {
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
