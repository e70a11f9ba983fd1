package slowstart

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestBatch(t *testing.T) {
	boom := errors.New("quota")
	for _, tc := range []struct {
		name      string
		count     int
		failAfter int64 // calls after this many fail; -1 never
		wantOK    int
		wantCalls int64
	}{
		{"all succeed", 10, -1, 10, 10},
		{"zero", 0, -1, 0, 0},
		{"first fails", 10, 0, 0, 1},                  // batch 1 fails: stop
		{"fails in third batch", 20, 4, 4, 7},         // 1+2 ok, batch of 4: 1 ok 3 fail
		{"fails in last partial batch", 10, 8, 8, 10}, // 1+2+4 ok, last batch of 3: 1 ok 2 fail
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			ok, err := Batch(context.Background(), tc.count, 1, func(context.Context) error {
				if n := calls.Add(1); tc.failAfter >= 0 && n > tc.failAfter {
					return boom
				}
				return nil
			})
			if ok != tc.wantOK || calls.Load() != tc.wantCalls {
				t.Errorf("ok=%d calls=%d, want ok=%d calls=%d", ok, calls.Load(), tc.wantOK, tc.wantCalls)
			}
			if (tc.failAfter >= 0 && tc.failAfter < int64(tc.count)) != (err != nil) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
