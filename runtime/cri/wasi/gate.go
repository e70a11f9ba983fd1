package wasi

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Guests run in the node agent's own process: their goroutines compete for the Go
// scheduler's Ps with the CRI server, the kubelet and (under `wasmplane up`) the API
// server. Instrumented guests come back to the host at every checkpoint and yield there,
// but with more spinning guests than Ps every host goroutine waits behind all of them
// (8 spinning containers on 2 Ps made CRI calls ≈ 100× slower). The gate therefore lets
// at most a fixed number of guests run guest code at once — by default one fewer than
// GOMAXPROCS, so a P is always left to the host — and hands the turn on at checkpoints,
// round robin, once a guest has had its time slice.
//
// A guest takes a turn only at its first checkpoint: a container that computes little
// between blocking calls never meets the gate. A guest may block (sleep, read stdin)
// while it holds a turn; the gate cannot see into WASI calls, so a holder that has not
// reached a checkpoint for stallAfter is presumed blocked and its turn given to a waiter.
// If it was in fact running a long loop body, it runs beside the others until its next
// checkpoint, where it queues again: the bound is exceeded by at most that much.
const (
	// timeSlice is how long a guest keeps its turn while others wait: long enough that
	// handing over (waking another guest's thread) costs little, short enough to keep
	// spinning guests fair with each other.
	timeSlice = 2 * time.Millisecond
	// stallAfter is how long a holder may go without a checkpoint before its turn is
	// given away. Instrumented code checks in every fuelQuantum loop iterations or
	// function entries: well under a millisecond for tight loops.
	stallAfter = 10 * time.Millisecond
)

// gate bounds the guests running guest code at once.
type gate struct {
	mu      sync.Mutex
	slots   int
	stall   time.Duration // stallAfter; tests that must not evict set it longer
	holders map[*turn]struct{}
	waiters []*turn // first come, first served
}

// turn is one guest's place at the gate. It is used by the guest's own goroutine only,
// except for the fields guarded by the gate's mutex.
type turn struct {
	g *gate
	// Guarded by g.mu.
	held  bool
	since time.Time // when the guest last took its turn or reached a checkpoint with it
	wake  chan struct{}
	// granted is when the current turn began (the guest's own goroutine only).
	granted time.Time
}

// newGate lets slots guests run at once; slots ≤ 0 means GOMAXPROCS − 1, at least one.
func newGate(slots int) *gate {
	if slots <= 0 {
		slots = max(1, runtime.GOMAXPROCS(0)-1)
	}
	return &gate{slots: slots, stall: stallAfter, holders: map[*turn]struct{}{}}
}

// newTurn is a guest's place, not yet holding a turn.
func (g *gate) newTurn() *turn { return &turn{g: g, wake: make(chan struct{}, 1)} }

// checkpoint is called by the guest at each of its checkpoints. It keeps the turn while
// the guest's slice lasts or nobody waits, otherwise hands it over and queues for the
// next one. It returns ctx's error if the guest's context ends while it waits.
func (t *turn) checkpoint(ctx context.Context) error {
	g := t.g
	now := time.Now()
	g.mu.Lock()
	if t.held && (len(g.waiters) == 0 || now.Sub(t.granted) < timeSlice) {
		t.since = now
		g.mu.Unlock()
		runtime.Gosched() // let host goroutines have the P between two stretches of guest code
		return nil
	}
	if t.held {
		g.releaseLocked(t)
	}
	err := g.acquireLocked(ctx, t) // unlocks
	t.granted = time.Now()
	return err
}

// leave gives up the turn (the guest has returned).
func (t *turn) leave() {
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.held {
		g.releaseLocked(t)
	}
	for i, w := range g.waiters {
		if w == t {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
}

// releaseLocked ends t's turn and passes it to the first waiter.
func (g *gate) releaseLocked(t *turn) {
	t.held = false
	delete(g.holders, t)
	g.grantLocked()
}

// grantLocked gives free turns to waiters, first come first served.
func (g *gate) grantLocked() {
	for len(g.holders) < g.slots && len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		g.takeLocked(w, time.Now())
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (g *gate) takeLocked(t *turn, now time.Time) {
	t.held, t.since = true, now
	g.holders[t] = struct{}{}
}

// acquireLocked waits for a turn for t; g.mu is held on entry and released on return.
// While it waits it gives away the turns of holders that seem blocked.
func (g *gate) acquireLocked(ctx context.Context, t *turn) error {
	if len(g.holders) < g.slots && len(g.waiters) == 0 {
		g.takeLocked(t, time.Now())
		g.mu.Unlock()
		return nil
	}
	g.waiters = append(g.waiters, t)
	g.mu.Unlock()
	timer := time.NewTimer(g.stall)
	defer timer.Stop()
	for {
		select {
		case <-t.wake:
		case <-ctx.Done():
		case <-timer.C:
			g.mu.Lock()
			if !t.held {
				g.evictStalledLocked(time.Now())
			}
			g.mu.Unlock()
			timer.Reset(g.stall)
		}
		if err := ctx.Err(); err != nil {
			t.leave() // a stopped guest runs no more guest code, turn or not
			return err
		}
		g.mu.Lock()
		held := t.held
		g.mu.Unlock()
		if held {
			return nil
		}
	}
}

// evictStalledLocked takes the turn from holders that have not reached a checkpoint for
// g.stall (presumed blocked in a host call) and gives it to waiters.
func (g *gate) evictStalledLocked(now time.Time) {
	for h := range g.holders {
		if now.Sub(h.since) >= g.stall {
			h.held = false
			delete(g.holders, h)
		}
	}
	g.grantLocked()
}

// turnKey carries a guest's turn in the context its code is called with, where the
// checkpoint host function finds it.
type turnKey struct{}

// withTurn returns ctx carrying t.
func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// yield is the runtime's checkpoint: the guest's turn at the gate, or a plain yield for
// code called without one.
func yield(ctx context.Context) error {
	if t, ok := ctx.Value(turnKey{}).(*turn); ok {
		return t.checkpoint(ctx)
	}
	runtime.Gosched()
	return nil
}
