package wasi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spinFor keeps the CPU busy for d, as guest code between two checkpoints does.
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func TestGateBoundsRunningGuests(t *testing.T) {
	for _, tc := range []struct {
		name          string
		slots, guests int
	}{
		{"one slot, six guests", 1, 6},
		{"two slots, six guests", 2, 6},
		{"more slots than guests", 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(tc.slots)
			// A loaded machine can pause a guest between checkpoints for longer than
			// stallAfter, which would rightly count it as blocked: here none is.
			g.stall = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var running, most atomic.Int32
			var wg sync.WaitGroup
			done := make([]int, tc.guests)
			for i := range tc.guests {
				wg.Go(func() {
					tn := g.newTurn()
					defer tn.leave()
					for range 100 {
						if err := tn.checkpoint(ctx); err != nil {
							t.Error(err)
							return
						}
						n := running.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						spinFor(50 * time.Microsecond)
						running.Add(-1)
						done[i]++
					}
				})
			}
			wg.Wait()
			if got, want := int(most.Load()), min(tc.slots, tc.guests); got > want {
				t.Errorf("%d guests ran guest code at once, want at most %d", got, want)
			}
			for i, n := range done {
				if n != 100 {
					t.Errorf("guest %d ran %d stretches, want 100", i, n)
				}
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.holders) != 0 || len(g.waiters) != 0 {
				t.Errorf("after every guest left: %d holders, %d waiters", len(g.holders), len(g.waiters))
			}
		})
	}
}

// A guest that blocks in a host call while it holds the only turn (a WASI sleep, a read
// of stdin) must not keep the others from running.
func TestGateGivesAwayTheTurnOfABlockedGuest(t *testing.T) {
	g := newGate(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sleeper, spinner := g.newTurn(), g.newTurn()
	if err := sleeper.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// The sleeper now blocks without reaching a checkpoint; the spinner queues.
	if err := spinner.checkpoint(ctx); err != nil {
		t.Fatalf("spinner waiting behind a blocked guest: %v", err)
	}
	g.mu.Lock()
	held := sleeper.held
	g.mu.Unlock()
	if held {
		t.Fatal("the blocked guest kept its turn")
	}
	// Back from its host call, the sleeper queues again at its next checkpoint, behind
	// the spinner, and gets the turn when the spinner leaves.
	got := make(chan error, 1)
	go func() { got <- sleeper.checkpoint(ctx) }()
	spinner.leave()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	sleeper.leave()
}

func TestGateWaitEndsWithTheGuestsContext(t *testing.T) {
	g := newGate(1)
	holder, waiter := g.newTurn(), g.newTurn()
	if err := holder.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- waiter.checkpoint(ctx) }()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("checkpoint of a stopped guest: %v, want context.Canceled", err)
	}
	g.mu.Lock()
	waiters := len(g.waiters)
	g.mu.Unlock()
	if waiters != 0 {
		t.Errorf("%d waiters left behind", waiters)
	}
	holder.leave()
}
