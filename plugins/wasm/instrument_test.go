package wasm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// TestInstrumentKeepsModulesValid instruments modules of every shape the host meets
// (hand-written WAT with and without globals and exports, imports of each kind, and a
// standard-Go module, the largest and most varied code) and checks that wazero accepts
// the result, that it exports the interrupt global, and that the checks are where they
// belong.
func TestInstrumentKeepsModulesValid(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		// checks is the number of fuel checks expected: one per function body plus one
		// per loop; -1 skips the count.
		checks int
	}{
		{"no globals, no exports", wasmtest.WATSource(t, `(module (func (loop $l (br $l))))`), 2},
		{"globals and exports", wasmtest.WATSource(t, `(module
			(global $g (mut i32) (i32.const 7))
			(func (export "f") (result i32) (global.get $g))
			(func (loop (loop (nop))) (block (loop))))`), 5},
		{"imports of each kind", wasmtest.WATSource(t, `(module
			(import "m" "f" (func $f (param i32)))
			(import "m" "t" (table 1 funcref))
			(import "m" "mem" (memory 1))
			(import "m" "g" (global $g i32))
			(func (export "x") (call $f (global.get $g))))`), 1},
		{"simd, bulk memory and br_table", wasmtest.WATSource(t, `(module
			(memory 1)
			(func (param i32) (result i32)
				(drop (v128.const i64x2 1 2))
				(memory.fill (i32.const 0) (i32.const 0) (i32.const 16))
				(block (block (br_table 0 1 (local.get 0))))
				(i32x4.extract_lane 1 (v128.load offset=16 (i32.const 0)))))`), 1},
		{"good", wasmtest.WAT(t, "good"), -1},
		{"go", wasmtest.Go(t, "examples/plugins/go/label-score"), -1},
	}
	ctx := context.Background()
	// The interpreter validates as the compiler does, in a fraction of the time; every
	// other test of this package runs instrumented modules through the compiler.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	hostModules(t, rt)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := instrument(tt.wasm)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("wazero refuses the instrumented module: %v", err)
			}
			defer cm.Close(ctx)
			if _, err := instrument(out); err == nil || !strings.Contains(err.Error(), "only the host") {
				t.Fatalf("no checkpoint import: instrumenting the output again gives %v", err)
			}
			if tt.checks >= 0 {
				// i32.le_s, if (empty), call: the check's signature.
				if n := bytes.Count(out, []byte{0x4c, 0x04, 0x40, 0x10}); n != tt.checks {
					t.Errorf("%d checks, want %d", n, tt.checks)
				}
			}
			again, err := instrument(tt.wasm)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("instrumenting twice differs (the compilation cache keys on these bytes): %v", err)
			}
		})
	}
}

// TestInstrumentRefuses covers what the host will not load.
func TestInstrumentRefuses(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		want string
	}{
		{"not wasm", []byte("hello, world"), "not a WebAssembly"},
		{"reserved export", wasmtest.WATSource(t, `(module (global (export "wasmplane.fuel") i32 (i32.const 0)))`), "reserves"},
		{"imports the checkpoint", wasmtest.WATSource(t, `(module (import "wasmplane" "checkpoint" (func)))`), "only the host"},
		{"truncated", wasmtest.WATSource(t, `(module (func (loop)))`)[:20], "unexpected end"},
		{"unknown opcode", []byte("\x00asm\x01\x00\x00\x00" +
			"\x01\x04\x01\x60\x00\x00" + // type () -> ()
			"\x03\x02\x01\x00" + // one function of type 0
			"\x0a\x05\x01\x03\x00\xc5\x0b"), "unknown opcode 0xc5"}, // body: no locals, 0xc5, end
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := instrument(tt.wasm)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestInterruptStopsRecursionWithoutLoops: a guest that never loops but recurses
// exponentially is stopped by the checks at function entries (wazero's own mechanism
// checks only loop headers).
func TestInterruptStopsRecursionWithoutLoops(t *testing.T) {
	src := `(module
		(memory (export "memory") 1)
		(func (export "wasmplane_abi_version") (result i32) (i32.const 1))
		(func (export "wasmplane_alloc") (param i32) (result i32) (i32.const 1024))
		(func $fib (param $n i32) (result i32)
			(if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
				(then (local.get $n))
				(else (i32.add
					(call $fib (i32.sub (local.get $n) (i32.const 1)))
					(call $fib (i32.sub (local.get $n) (i32.const 2)))))))
		(func (export "validate") (param i32 i32) (result i64)
			(drop (call $fib (i32.const 60)))
			(i64.const 0)))`
	r, _ := newTestRuntime(t)
	const deadline = 200 * time.Millisecond
	p := load(t, r, wasmtest.WATSource(t, src), PluginConfig{Limits: Limits{Timeout: deadline, Instances: 1}})
	// The plugin's deadline stops the recursion long before the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Validate(ctx, admission)
	if !errors.Is(err, ErrTimeout) || ctx.Err() != nil {
		t.Fatalf("err = %v (caller's deadline: %v), want the plugin's %v timeout", err, ctx.Err(), deadline)
	}
}

// TestInterruptOnCallerCancel: a caller that gives up stops the guest, not only the
// deadline does.
func TestInterruptOnCallerCancel(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.WAT(t, "loop"), PluginConfig{Limits: Limits{Timeout: time.Minute, Instances: 1}})
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Validate(ctx, admission)
		errc <- err
	}()
	cancel(errors.New("client went away"))
	select {
	case err := <-errc:
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "client went away") {
			t.Fatalf("err = %v, want a timeout naming the cause", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the guest was not stopped when its caller gave up")
	}
	// The plugin still serves.
	if _, err := p.Call(context.Background(), abi.HookAuthenticate, []byte(`{"method":"GET","path":"/"}`)); err != nil {
		t.Fatalf("call after the interrupt: %v", err)
	}
}
