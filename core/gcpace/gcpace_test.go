package gcpace

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestPercent(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name     string
		live     uint64
		headroom uint64
		base     int
		want     int
	}{
		{"small heap gets the headroom", 32 * mi, 128 * mi, 100, 400},
		{"rounded up", 100 * mi, 128 * mi, 100, 128},
		{"heap larger than the headroom keeps GOGC", 512 * mi, 128 * mi, 100, 100},
		{"a higher GOGC is kept", 64 * mi, 128 * mi, 300, 300},
		{"no headroom keeps GOGC", 1 * mi, 0, 100, 100},
		{"collection off stays off", 1 * mi, 128 * mi, -1, -1},
		{"an empty heap is bounded", 0, 128 * mi, 100, maxPercent},
		{"a tiny heap is bounded", 1024, 128 * mi, 100, maxPercent},
		{"a GOGC above the bound is kept", 1024, 128 * mi, 9000, 9000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.headroom, tc.base); got != tc.want {
				t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.headroom, tc.base, got, tc.want)
			}
		})
	}
}

// gcPercent reads the collector's percent without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestRunRaisesThePercentAndPutsItBack(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Pacer{MinHeadroom: 1 << 40, Interval: time.Millisecond}.Run(ctx)
	}()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		runtime.GC()
		return gcPercent() == maxPercent, nil
	})
	if err != nil {
		t.Fatalf("the pacer did not raise the percent for a heap far below its headroom: it is %d", gcPercent())
	}
	cancel()
	<-done
	if got := gcPercent(); got != 100 {
		t.Errorf("after the pacer stopped the percent is %d, want the 100 it started with", got)
	}
}

func TestRunLeavesCollectionOff(t *testing.T) {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	Pacer{MinHeadroom: 1 << 30, Interval: time.Millisecond}.Run(ctx) // returns at once
	if got := gcPercent(); got != -1 {
		t.Errorf("GOGC=off became %d", got)
	}
}

func TestRunWithoutHeadroomReturns(t *testing.T) {
	Pacer{}.Run(context.Background()) // must not block
}
