// Package waitfor is the one way the tests wait for a condition: apimachinery's
// wait.PollUntilContextTimeout with a deadline, failing the test with what was awaited.
// Tests never sleep a fixed time and never assert elapsed time; a bound on how long
// something may take is the deadline of the wait.
package waitfor

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Interval is how often a condition is checked.
const Interval = 50 * time.Millisecond

// Condition checks cond at once and then every Interval until it returns true, and
// fails tb if it has not within timeout or returns an error. what names the condition
// in the failure ("pod x to be bound").
func Condition(tb testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	tb.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), Interval, timeout, true, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// NoError calls check at once and then every Interval until it returns nil, and fails tb
// if it has not within timeout. A failing check is retried, not fatal (a read may race
// the write it waits for); the last error goes into the failure, so it says what was
// still wrong.
func NoError(tb testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	tb.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), Interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		tb.Fatalf("waiting for %s: %v (last check: %v)", what, err, last)
	}
}
