package wasm

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// BenchmarkNoopCall is the round trip of a hook that does nothing: get an instance,
// write 2 bytes, call, read the answer, put the instance back.
func BenchmarkNoopCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		term termination
	}{{"checkpoint", termCheckpoint}, {"closeOnContextDone", termWazero}, {"noTermination", termNone}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := NewRuntime(context.Background(), RuntimeConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), termination: tc.term})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(context.Background())
			p := load(b, r, wasmtest.WAT(b, "good"), PluginConfig{Limits: Limits{Instances: 1}})
			ctx := context.Background()
			req := []byte(`{}`)
			noop := func(*instance) ([]byte, error) { return req, nil }
			ignore := func([]byte) error { return nil }
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := p.invoke(ctx, abi.HookValidate, noop, ignore, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("Call+envelope", func(b *testing.B) {
		r, _ := newTestRuntime(b)
		p := load(b, r, wasmtest.WAT(b, "good"), PluginConfig{Limits: Limits{Instances: 1}})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Call(context.Background(), abi.HookValidate, []byte(`{}`)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoopTermination measures what each way of making deadlines enforceable costs
// a guest running a tight loop of 10^6 iterations, the worst case for per-loop checks:
// none (unsafe), wazero's WithCloseOnContextDone, and the host's fuel checks (with a
// checkpoint that refills the fuel and yields, every fuelQuantum iterations).
func BenchmarkLoopTermination(b *testing.B) {
	wasm := wasmtest.WATSource(b, `(module
		(func (export "spin") (param $n i32) (result i32) (local $i i32)
			(loop $l
				(local.set $i (i32.add (local.get $i) (i32.const 1)))
				(br_if $l (i32.lt_u (local.get $i) (local.get $n))))
			(local.get $i)))`)
	instrumented, err := instrument(wasm)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		wazero bool
		wasm   []byte
	}{{"none", false, wasm}, {"closeOnContextDone", true, wasm}, {"checkpoint", false, instrumented}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(tc.wazero))
			defer rt.Close(ctx)
			hostModules(b, rt)
			mod, err := rt.Instantiate(ctx, tc.wasm)
			if err != nil {
				b.Fatal(err)
			}
			fn := mod.ExportedFunction("spin")
			for b.Loop() {
				if _, err := fn.Call(ctx, 1_000_000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstantiate creates one ready instance (instantiate, _initialize, version
// check, configure) from an already compiled module.
func BenchmarkInstantiate(b *testing.B) {
	mods := map[string][]byte{"wat": wasmtest.WAT(b, "good")}
	mods["go"] = wasmtest.Go(b, "examples/plugins/go/label-score")
	for _, name := range []string{"wat", "go"} {
		b.Run(name, func(b *testing.B) {
			r, _ := newTestRuntime(b)
			p := load(b, r, mods[name], PluginConfig{Config: []byte(`{"label":"x"}`), Limits: Limits{Instances: 1}})
			s := p.acquire()
			defer s.release(context.Background())
			b.ReportAllocs()
			for b.Loop() {
				in, err := s.newInstance(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				in.close(context.Background())
			}
		})
	}
}

// BenchmarkCompileGo compiles a standard-Go example: cold (empty cache) and from the
// on-disk compilation cache of a previous runtime.
func BenchmarkCompileGo(b *testing.B) {
	wasm := wasmtest.Go(b, "examples/plugins/go/label-score")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	compile := func(b *testing.B, dir string) {
		r, err := NewRuntime(ctx, RuntimeConfig{CacheDir: dir, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		m, err := r.Compile(ctx, wasm, "")
		if err != nil {
			b.Fatal(err)
		}
		_ = m.Close(ctx)
		_ = r.Close(ctx)
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			compile(b, "")
		}
	})
	b.Run("fileCache", func(b *testing.B) {
		dir := b.TempDir()
		compile(b, dir)
		b.ResetTimer()
		for b.Loop() {
			compile(b, dir)
		}
	})
}
