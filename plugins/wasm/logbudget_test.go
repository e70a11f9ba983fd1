package wasm

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"golang.org/x/time/rate"
)

// recorder is a slog handler that keeps every record's message.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

func TestLogBudget(t *testing.T) {
	for _, tc := range []struct {
		name           string
		burst, lines   int
		wantWritten    int
		wantSuppressed int
	}{
		{"within the burst", 10, 4, 4, 0},
		{"exactly the burst", 10, 10, 10, 0},
		{"over the burst", 10, 25, 10, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			l := slog.New(rec)
			// A rate so low that no token comes back during the test.
			b := NewLogBudget(1e-6, tc.burst)
			for range tc.lines {
				b.Log(context.Background(), l, "p", slog.LevelWarn, "line")
			}
			if got := rec.count("line"); got != tc.wantWritten {
				t.Errorf("%d lines written, want %d", got, tc.wantWritten)
			}
			if got := b.Suppressed(); got != tc.wantSuppressed {
				t.Errorf("%d suppressed, want %d", got, tc.wantSuppressed)
			}
			// Once the budget allows again, the next line carries the count.
			b.lim.SetLimit(rate.Inf)
			b.Log(context.Background(), l, "p", slog.LevelWarn, "line")
			wantReports := 0
			if tc.wantSuppressed > 0 {
				wantReports = 1
			}
			if got := rec.count("plugin log lines suppressed"); got != wantReports {
				t.Errorf("%d suppression reports, want %d", got, wantReports)
			}
			if b.Suppressed() != 0 {
				t.Errorf("suppressed count not reset after the report: %d", b.Suppressed())
			}
		})
	}
	var none *LogBudget
	rec := &recorder{}
	none.Log(context.Background(), slog.New(rec), "p", slog.LevelInfo, "line")
	if rec.count("line") != 1 {
		t.Error("a nil budget must let every line through")
	}
}

// chattyWAT logs 100 lines on every validate call: far over the per-call limit and,
// across calls, over the plugin's budget.
const chattyWAT = `(module
  (import "wasmplane" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))
  (func (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (data (i32.const 0) "chatty")
  (data (i32.const 128) "{\"allowed\":true}")
  (func (export "validate") (param i32 i32) (result i64)
    (local $i i32)
    (global.set $heap (i32.const 4096))
    (loop $again
      (call $log (i32.const 1) (i32.const 0) (i32.const 6))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 100))))
    (i64.or (i64.shl (i64.const 128) (i64.const 32)) (i64.const 16)))
)`

// TestPluginLogBudget checks that a plugin logging on every call puts a bounded number of
// lines into the server's log, and says how many it suppressed.
func TestPluginLogBudget(t *testing.T) {
	rec := &recorder{}
	r, err := NewRuntime(context.Background(), RuntimeConfig{CacheDir: wasmtest.CacheDir(t), Registerer: prometheus.NewRegistry(),
		Logger: slog.New(rec), CallBounds: CallBounds{SuspendAfter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	p := load(t, r, wasmtest.WATSource(t, chattyWAT), PluginConfig{Name: "chatty", Limits: Limits{Instances: 1}})
	const calls = 200
	start := time.Now()
	for i := range calls {
		if _, err := p.Validate(context.Background(), admission); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	written := rec.count("chatty") + rec.count("plugin log messages dropped")
	// The budget's burst plus its steady rate over the run, plus one report per line let
	// through after a suppression.
	bound := defaultLogBurst + int(defaultLogRate*elapsed.Seconds()+1)
	if written > bound {
		t.Errorf("%d plugin lines in the log after %d calls in %v, want at most %d", written, calls, elapsed, bound)
	}
	if written < defaultLogBurst {
		t.Errorf("only %d plugin lines written; the burst of %d should pass", written, defaultLogBurst)
	}
	if p.LogBudget().Suppressed() == 0 && rec.count("plugin log lines suppressed") == 0 {
		t.Error("nothing counted as suppressed")
	}
	t.Logf("%d calls logging 100 lines each in %v: %d lines written, %d suppression reports, %d pending",
		calls, elapsed, written, rec.count("plugin log lines suppressed"), p.LogBudget().Suppressed())
}
