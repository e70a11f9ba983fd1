// Package gcpace paces the Go garbage collector for a server whose live heap is often
// small: the heap may grow by at least a fixed headroom over what is live before the next
// collection, instead of only by GOGC percent of it.
//
// With GOGC's default of 100 a control plane holding 40 MB of live objects collects every
// 40 MB allocated, so a burst of writes spends a tenth or more of its CPU marking the same
// live heap again and again. Raising the percent while the live heap is small trades a
// bounded amount of memory (the headroom) for those cycles; once the live heap is larger
// than the headroom, GOGC's own percent applies unchanged, so a big server's memory is
// what it was. A soft memory limit (debug.SetMemoryLimit) still bounds the total.
package gcpace

import (
	"context"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultInterval is how often Run looks for a finished collection.
const DefaultInterval = 200 * time.Millisecond

// maxPercent bounds the percent Run sets: with an almost empty heap the headroom alone
// would ask for tens of thousands.
const maxPercent = 5000

// Percent is the GOGC percent that lets a heap with live bytes grow by at least
// minHeadroom before the next collection, and never less than base. A base below zero
// (collection off) is returned unchanged.
func Percent(live, minHeadroom uint64, base int) int {
	if base < 0 || minHeadroom == 0 {
		return base
	}
	if live == 0 {
		return max(base, maxPercent)
	}
	p := math.Ceil(float64(minHeadroom) * 100 / float64(live))
	if p >= maxPercent {
		return max(base, maxPercent)
	}
	return max(base, int(p))
}

// Pacer keeps the collector's percent at Percent(live heap, MinHeadroom, the percent the
// process started with) after every collection.
type Pacer struct {
	// MinHeadroom is how many bytes the heap may grow over the live heap before a
	// collection; zero leaves the collector as it is.
	MinHeadroom uint64
	// Interval is how often the pacer reads the runtime's metrics; zero means
	// DefaultInterval.
	Interval time.Duration
	// Logger receives a line when the pacer starts.
	Logger *slog.Logger
}

// Run paces the collector until ctx is done, then puts back the percent the process had.
// It reads the runtime's metrics every Interval and changes the percent only after a
// collection, when the live heap is known afresh.
func (p Pacer) Run(ctx context.Context) {
	if p.MinHeadroom == 0 {
		return
	}
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return // a runtime without these metrics: leave the collector alone
		}
	}
	base := int(samples[2].Value.Uint64())
	if debug.SetGCPercent(base) < 0 {
		return // GOGC=off: the operator chose the memory limit alone
	}
	defer debug.SetGCPercent(base)
	if p.Logger != nil {
		p.Logger.Info("pacing the garbage collector", "minHeadroomBytes", p.MinHeadroom, "basePercent", base)
	}
	var lastCycle uint64
	set := -1
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		metrics.Read(samples[:2])
		if cycle := samples[0].Value.Uint64(); cycle != lastCycle || set < 0 {
			lastCycle = cycle
			if want := Percent(samples[1].Value.Uint64(), p.MinHeadroom, base); want != set {
				debug.SetGCPercent(want)
				set = want
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
