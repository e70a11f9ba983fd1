package toolkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// BenchStats are the figures of one benchmark run.
type BenchStats struct {
	// Calls is how many calls were timed (the warm-up call is not counted).
	Calls int
	// Errors is how many of them failed.
	Errors int
	// Parallel is the number of concurrent callers.
	Parallel int
	// Elapsed is the wall time of all calls.
	Elapsed time.Duration
	// PerSecond is successful and failed calls per second of wall time.
	PerSecond float64
	// P50, P99 and Max are per-call latencies (nearest rank).
	P50, P99, Max time.Duration
	// FirstError is the first failure, if any (its kind tells what went wrong).
	FirstError error
}

// String renders the figures on one line.
func (s BenchStats) String() string {
	line := fmt.Sprintf("%d calls in %v with %d parallel: %.0f calls/s, latency p50 %v p99 %v max %v",
		s.Calls, s.Elapsed.Round(time.Millisecond), s.Parallel, s.PerSecond, s.P50, s.P99, s.Max)
	if s.Errors > 0 {
		line += fmt.Sprintf("; %d errors (first: %s: %v)", s.Errors, wasm.KindOf(s.FirstError), s.FirstError)
	}
	return line
}

// Bench sends call n times from parallel goroutines (the Runner should have been opened
// with as many instances) and measures throughput and per-call latency. One warm-up call
// runs first so the figures do not include the first touch of each instance's memory.
func Bench(ctx context.Context, call *Call, n, parallel int) (BenchStats, error) {
	if n <= 0 {
		return BenchStats{}, fmt.Errorf("bench: -n must be positive, got %d", n)
	}
	parallel = max(1, min(parallel, n))
	if _, err := call.Do(ctx); err != nil {
		return BenchStats{}, fmt.Errorf("bench: warm-up call: %w", err)
	}
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				_, errs[i] = call.Do(ctx)
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return BenchStats{}, fmt.Errorf("bench: %w", err)
	}
	st := BenchStats{Calls: n, Parallel: parallel, Elapsed: elapsed, PerSecond: float64(n) / elapsed.Seconds()}
	for _, err := range errs {
		if err != nil {
			st.Errors++
			if st.FirstError == nil {
				st.FirstError = err
			}
		}
	}
	slices.Sort(lat)
	st.P50, st.P99, st.Max = percentile(lat, 50), percentile(lat, 99), lat[len(lat)-1]
	return st, nil
}

// percentile returns the nearest-rank percentile p of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
