package wasm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

func TestBreaker(t *testing.T) {
	timeout := &Error{Kind: ErrTimeout}
	oom := &Error{Kind: ErrOutOfMemory}
	trap := &Error{Kind: ErrTrap}
	guest := &Error{Kind: ErrGuest}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A step either records a call's end (err, probe) or asks allow and expects an answer.
	type step struct {
		ms        int
		record    bool
		probe     bool
		err       error
		wantProbe bool
		wantErr   bool
		abandon   bool
	}
	rec := func(ms int, err error) step { return step{ms: ms, record: true, err: err} }
	recProbe := func(ms int, err error) step { return step{ms: ms, record: true, probe: true, err: err} }
	allowed := func(ms int) step { return step{ms: ms} }
	probe := func(ms int) step { return step{ms: ms, wantProbe: true} }
	refused := func(ms int) step { return step{ms: ms, wantErr: true} }
	cases := []struct {
		name  string
		after int
		steps []step
	}{
		{"costly failures below the threshold", 3, []step{rec(0, timeout), rec(1, oom), allowed(2)}},
		{"a success resets the count", 3, []step{rec(0, timeout), rec(1, timeout), rec(2, nil), rec(3, timeout), rec(4, timeout), allowed(5)}},
		{"cheap failures neither count nor reset", 3, []step{rec(0, timeout), rec(1, trap), rec(2, guest), rec(3, timeout), rec(4, timeout), refused(5)}},
		{"suspended, then one probe", 2, []step{rec(0, timeout), rec(1, timeout), refused(2), refused(2000), probe(2001), refused(2002)}},
		{"a successful probe closes it", 2, []step{rec(0, timeout), rec(0, timeout), probe(2000), recProbe(2100, nil), allowed(2101), rec(2102, timeout), allowed(2103)}},
		{"a probe failing cheaply closes it", 2, []step{rec(0, oom), rec(0, oom), probe(2000), recProbe(2001, trap), allowed(2002)}},
		{"a failed probe doubles the suspension", 2, []step{rec(0, timeout), rec(0, timeout), probe(2000), recProbe(3000, timeout), refused(6999), probe(7000), recProbe(8000, timeout), refused(15999), probe(16000)}},
		{"the suspension stops growing at the maximum", 2, []step{rec(0, timeout), rec(0, timeout),
			probe(2000), recProbe(2000, timeout), probe(6000), recProbe(6000, timeout), probe(14000), recProbe(14000, timeout),
			probe(24000), recProbe(24000, timeout), refused(33999), probe(34000)}},
		{"an abandoned probe lets the next call probe", 2, []step{rec(0, timeout), rec(0, timeout), probe(2000), {ms: 2001, abandon: true}, probe(2002)}},
		{"never suspends when disabled", -1, []step{rec(0, timeout), rec(0, timeout), rec(0, timeout), allowed(1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(RuntimeConfig{CallBounds: CallBounds{SuspendAfter: tc.after, SuspendFor: 2 * time.Second, MaxSuspension: 10 * time.Second}})
			for i, s := range tc.steps {
				switch {
				case s.abandon:
					b.abandon()
				case s.record:
					b.record(at(s.ms), s.probe, s.err)
				default:
					gotProbe, err := b.allow(at(s.ms))
					if gotProbe != s.wantProbe || (err != nil) != s.wantErr {
						t.Fatalf("step %d at %d ms: allow = (%v, %v), want probe %v, refused %v", i, s.ms, gotProbe, err, s.wantProbe, s.wantErr)
					}
				}
			}
		})
	}
	if KindOf(errors.Join(&Error{Kind: ErrSuspended})) != ErrSuspended || ErrSuspended.discards() {
		t.Error("a suspended call must be ErrSuspended and keep its instance")
	}
}

// TestFaultyPluginIsSuspended drives the breaker through real calls: a looping and a
// memory-bombing plugin are suspended after SuspendAfter faults (their next call fails at
// once, with no guest code run), probed after SuspendFor, and a swap to a good module
// serves again at once.
func TestFaultyPluginIsSuspended(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
	}{{"loop", ErrTimeout}, {"membomb", ErrOutOfMemory}} {
		t.Run(tc.name, func(t *testing.T) {
			const after = 3
			r, _ := newTestRuntimeWith(t, RuntimeConfig{CallBounds: CallBounds{SuspendAfter: after, SuspendFor: 300 * time.Millisecond, MaxSuspension: time.Second}})
			p := load(t, r, wasmtest.WAT(t, tc.name), PluginConfig{Limits: Limits{Timeout: 100 * time.Millisecond, MemoryBytes: 16 << 20, Instances: 1}})
			ctx := context.Background()
			for i := range after {
				if _, err := p.Validate(ctx, admission); !errors.Is(err, tc.kind) {
					t.Fatalf("call %d: %v, want %s", i, err, tc.kind)
				}
			}
			// A suspended call fails at once, without running the guest: far inside a
			// deadline shorter than the plugin's own 100 ms.
			quick, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := p.Validate(quick, admission)
			if !errors.Is(err, ErrSuspended) || !strings.Contains(err.Error(), "3 calls in a row ran out of time or memory") {
				t.Fatalf("after %d faults: %v, want a suspension", after, err)
			}
			// After the suspension one call probes, and fails as before.
			err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := p.Validate(ctx, admission)
				return !errors.Is(err, ErrSuspended), nil
			})
			if err != nil {
				t.Fatal("the suspended plugin was never probed")
			}
			if _, err := p.Validate(ctx, admission); !errors.Is(err, ErrSuspended) {
				t.Fatalf("after a failed probe: %v, want a suspension again", err)
			}
			// A new module starts with a closed breaker.
			good := wasmtest.WAT(t, "good")
			m, err := r.Compile(ctx, good, Digest(good))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			if err := p.Swap(ctx, m); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Validate(ctx, admission); err != nil {
				t.Fatalf("after a swap to a good module: %v", err)
			}
		})
	}
}
