package framework

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
)

// filterBlock is how many nodes a batch Filter (a WASM guest) judges per call in the
// walk: a call has a fixed cost of a few µs, and the nodes judged past the point where
// the walk has enough feasible nodes are wasted.
const filterBlock = 64

// FindFeasible is the scheduler's Filter walk: it runs the Filter plugins over nodes from
// start (wrapping) on the framework's parallel workers, in blocks handed out in order,
// and stops once toFind nodes pass. It returns the feasible nodes (at most toFind) and,
// by walk position (rejected[i] is about nodes[(start+i)%len(nodes)]), the status of
// each node a plugin rejected; nodes neither feasible nor rejected were not processed. A
// plugin's Error ends the walk with that error. A profile with a BatchFilterPlugin walks
// blocks of filterBlock nodes, one batch call per block; others walk the Parallelizer's
// chunks.
func (ps *PluginSet) FindFeasible(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo, start, toFind int) (feasible []*NodeInfo, rejected []*Status, err error) {
	num := len(nodes)
	if num == 0 || toFind <= 0 {
		return nil, nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feasible = make([]*NodeInfo, toFind)
	rejected = make([]*Status, num)
	var found atomic.Int32
	var errOnce sync.Once
	par, batch, size := ps.fw.parallel, ps.HasBatchFilterPlugins(), ChunkSize(num)
	if batch {
		// A batch call is CPU-bound: more workers than CPUs only start more blocks at
		// once, judging nodes past the walk's stop.
		par, size = par.AtMost(runtime.GOMAXPROCS(0)), filterBlock
	}
	par.Blocks(ctx, num, size, func(lo, hi int) {
		sts := rejected[lo:hi]
		if batch {
			block := make([]*NodeInfo, hi-lo)
			for i := range block {
				block[i] = nodes[(start+lo+i)%num]
			}
			ps.RunFilterPluginsBatch(ctx, state, pod, block, sts)
		} else {
			for i := range sts {
				sts[i] = ps.RunFilterPlugins(ctx, state, pod, nodes[(start+lo+i)%num])
			}
		}
		for i, st := range sts {
			switch {
			case st.IsSuccess():
				sts[i] = nil
				n := found.Add(1)
				if int(n) > toFind {
					cancel()
					found.Add(-1)
					continue
				}
				feasible[n-1] = nodes[(start+lo+i)%num]
			case st.Code() == Error:
				sts[i] = nil
				errOnce.Do(func() { err = st.Err() })
				cancel()
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return feasible[:found.Load()], rejected, nil
}
