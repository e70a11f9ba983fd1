package wasm

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// watchdogTick bounds how late an overrunning call is stopped: a call's deadline is
// honoured within one tick (the fault tests allow ±50 ms).
const watchdogTick = 5 * time.Millisecond

// termination selects how a call's deadline stops a guest. Only benchmarks pick another
// mode than the default, to measure what each costs.
type termination int

const (
	// termInterrupt instruments modules (instrument.go) and stops them from the watchdog.
	termInterrupt termination = iota
	// termWazero uses wazero's WithCloseOnContextDone: a goroutine per call and a call
	// out to Go at every loop header.
	termWazero
	// termNone cannot stop a runaway guest; it exists to measure the others against.
	termNone
)

// watchdog is one goroutine per runtime that interrupts guests whose call overran its
// deadline or whose caller gave up. It only wakes while calls are in flight.
type watchdog struct {
	r      *Runtime
	epoch  time.Time
	active atomic.Int64
	wake   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWatchdog(r *Runtime) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchdog{r: r, epoch: time.Now(), wake: make(chan struct{}, 1), cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run(ctx)
	}()
	return w
}

// stop ends the watchdog goroutine and waits for it.
func (w *watchdog) stop() {
	w.cancel()
	w.wg.Wait()
}

// mono turns a wall-clock time into the watchdog's monotonic nanoseconds.
func (w *watchdog) mono(t time.Time) int64 { return int64(t.Sub(w.epoch)) }

func (w *watchdog) run(ctx context.Context) {
	t := time.NewTimer(watchdogTick)
	defer t.Stop()
	for {
		if w.active.Load() == 0 {
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
		}
		t.Reset(watchdogTick)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		now := int64(time.Since(w.epoch))
		w.r.instances.Range(func(_, v any) bool {
			v.(*instance).watch(now)
			return true
		})
	}
}

// arm starts watching a call of in that must end by deadline or when ctx is done.
func (in *instance) arm(ctx context.Context, deadline time.Time) {
	w := in.set.p.r.wd
	in.guard.Lock()
	in.armed, in.deadline, in.ctx, in.fired = true, w.mono(deadline), ctx, nil
	in.guard.Unlock()
	if w.active.Add(1) == 1 {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// disarm ends the watch. If the watchdog fired just as the guest returned, the
// interrupt flag is cleared so a call that did finish leaves a usable instance.
func (in *instance) disarm() {
	in.set.p.r.wd.active.Add(-1)
	in.guard.Lock()
	in.armed, in.ctx = false, nil
	if in.fired != nil && in.interrupt != nil {
		in.interrupt.Set(0)
	}
	in.guard.Unlock()
}

// interrupted says why the watchdog stopped the last call, or nil.
func (in *instance) interrupted() error {
	in.guard.Lock()
	defer in.guard.Unlock()
	return in.fired
}

// watch is the watchdog's look at one instance.
func (in *instance) watch(now int64) {
	in.guard.Lock()
	defer in.guard.Unlock()
	if !in.armed || in.fired != nil {
		return
	}
	switch {
	case now >= in.deadline:
		in.fired = context.DeadlineExceeded
	case in.ctx.Err() != nil:
		in.fired = context.Cause(in.ctx)
	default:
		return
	}
	if in.interrupt != nil {
		in.interrupt.Set(1)
	}
}
