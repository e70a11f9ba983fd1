package wasm

import (
	"fmt"
	"sync"
	"time"
)

// Breaker defaults (RuntimeConfig.SuspendAfter, SuspendFor, MaxSuspension).
const (
	DefaultSuspendAfter  = 5
	DefaultSuspendFor    = 2 * time.Second
	DefaultMaxSuspension = time.Minute
)

// breaker suspends a module whose calls keep failing in the ways that cost the host most:
// running to their deadline and exhausting their memory. Bounded concurrency keeps such a
// plugin from starving the host, but each of its calls still burns a CPU for a whole
// timeout; on a small machine that alone raises every other request's latency. Once a
// plugin has failed that way SuspendAfter times in a row, its calls fail at once (its
// failurePolicy then decides, as for any failure) for SuspendFor; then one call is let
// through as a probe: its success closes the breaker, a costly failure suspends it again
// for twice as long, up to MaxSuspension. Any success in between resets the count, so a
// plugin that fails only on some objects is never suspended; a swap to another module
// starts with a closed breaker.
type breaker struct {
	after      int
	first, max time.Duration

	mu       sync.Mutex
	failures int           // consecutive costly failures
	until    time.Time     // suspended before this
	backoff  time.Duration // the current suspension
	probing  bool          // a probe call is running
	last     Kind          // how the last costly call failed
}

func newBreaker(cfg RuntimeConfig) *breaker {
	return &breaker{after: cfg.SuspendAfter, first: cfg.SuspendFor, max: cfg.MaxSuspension}
}

// allow says whether a call may run guest code now; probe is true for the one call let
// through after a suspension.
func (b *breaker) allow(now time.Time) (probe bool, err error) {
	if b.after <= 0 {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.after {
		return false, nil
	}
	if now.Before(b.until) || b.probing {
		left := b.until.Sub(now).Round(time.Millisecond)
		if b.probing || left < 0 {
			left = 0
		}
		return false, fmt.Errorf("%d calls in a row ran out of time or memory (the last: %s); next attempt in %v", b.failures, b.last, left)
	}
	b.probing = true
	return true, nil
}

// record notes how a call that ran guest code ended.
func (b *breaker) record(now time.Time, probe bool, err error) {
	if b.after <= 0 {
		return
	}
	k := KindOf(err)
	costly := k == ErrTimeout || k == ErrOutOfMemory
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	if !costly {
		if err == nil || probe {
			b.failures, b.backoff = 0, 0
		}
		return
	}
	b.failures++
	b.last = k
	switch {
	case probe:
		b.backoff = min(2*b.backoff, b.max)
	case b.failures == b.after:
		b.backoff = b.first
	default:
		return
	}
	b.until = now.Add(b.backoff)
}

// abandon ends a probe that never ran guest code.
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}
