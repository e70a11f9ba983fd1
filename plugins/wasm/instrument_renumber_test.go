package wasm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// hostModules gives rt the host functions instrumented test modules import: the
// checkpoint (refill and yield), and env.add/env.g for TestInstrumentRenumbers.
func hostModules(tb testing.TB, rt wazero.Runtime) {
	tb.Helper()
	ctx := context.Background()
	_, err := rt.NewHostModuleBuilder("wasmplane").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, mod api.Module, _ []uint64) {
			mod.ExportedGlobal(fuelExport).(api.MutableGlobal).Set(fuelQuantum)
			runtime.Gosched()
		}), nil, nil).
		Export(checkpointImport).
		NewFunctionBuilder().
		WithFunc(func(level, ptr, n uint32) {}).
		Export("log").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().
		WithFunc(func(a, b uint32) uint32 { return a + b }).
		Export("add").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
}

// renumberSource uses every place that names a function: calls to imported and defined
// functions, return_call, exports, the start function, an active element segment of
// indices, a passive segment of expressions (table.init), a declarative one (ref.func in
// code), a global initialized with ref.func, call_indirect, and a name section.
const renumberSource = `(module $m
	(type $bin (func (param i32 i32) (result i32)))
	(type $un (func (result i32)))
	(import "env" "add" (func $add (type $bin)))
	(table $t 4 funcref)
	(global $started (mut i32) (i32.const 0))
	(global $ref funcref (ref.func $seven))
	(elem (table $t) (i32.const 0) func $seven $eight)
	(elem $late funcref (ref.func $nine) (ref.null func))
	(elem declare func $ten)
	(func $seven (type $un) (i32.const 7))
	(func $eight (type $un) (i32.const 8))
	(func $nine (type $un) (i32.const 9))
	(func $ten (type $un) (i32.const 10))
	(func $start (global.set $started (i32.const 1)))
	(func $via_table (export "via_table") (param $i i32) (result i32)
		(call_indirect (type $un) (local.get $i)))
	(func $sum (export "sum") (result i32)
		(call $add (call $seven) (call $eight)))
	(func $tail (export "tail") (result i32)
		(return_call $nine))
	(func $late_init (export "late_init") (result i32)
		(table.init $t $late (i32.const 2) (i32.const 0) (i32.const 1))
		(call_indirect (type $un) (i32.const 2)))
	(func $by_ref (export "by_ref") (result i32)
		(table.set $t (i32.const 3) (ref.func $ten))
		(call_indirect (type $un) (i32.const 3)))
	(func $by_global (export "by_global") (result i32)
		(table.set $t (i32.const 3) (global.get $ref))
		(call_indirect (type $un) (i32.const 3)))
	(func $started_ (export "started") (result i32) (global.get $started))
	(func $spin (export "spin") (param $n i32) (result i32) (local $i i32)
		(loop $l
			(local.set $i (i32.add (local.get $i) (i32.const 1)))
			(br_if $l (i32.lt_u (local.get $i) (local.get $n))))
		(local.get $i))
	(start $start))`

// TestInstrumentRenumbers checks that the instrumented module behaves as the original:
// every export answers the same, through every kind of function reference, and the name
// section still names the same functions.
func TestInstrumentRenumbers(t *testing.T) {
	ctx := context.Background()
	wasm := watWithNames(t, renumberSource)
	out, err := instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	results := func(t *testing.T, wasm []byte) (map[string]uint64, map[string]string) {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
			WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
		defer rt.Close(ctx)
		hostModules(t, rt)
		mod, err := rt.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		got, names := map[string]uint64{}, map[string]string{}
		calls := []struct {
			name string
			args []uint64
		}{{"via_table", []uint64{0}}, {"via_table", []uint64{1}}, {"sum", nil}, {"tail", nil},
			{"late_init", nil}, {"by_ref", nil}, {"by_global", nil}, {"started", nil}, {"spin", []uint64{3 * fuelQuantum}}}
		for _, c := range calls {
			fn := mod.ExportedFunction(c.name)
			res, err := fn.Call(ctx, c.args...)
			if err != nil {
				t.Fatalf("%s%v: %v", c.name, c.args, err)
			}
			key := c.name
			if len(c.args) > 0 {
				key += string(rune('0' + c.args[0]%10))
			}
			got[key] = res[0]
			names[c.name] = fn.Definition().DebugName()
		}
		return got, names
	}
	want, wantNames := results(t, wasm)
	got, gotNames := results(t, out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d instrumented, %d originally", k, got[k], v)
		}
	}
	for k, v := range wantNames {
		if gotNames[k] != v {
			t.Errorf("%s is named %q instrumented, %q originally", k, gotNames[k], v)
		}
	}
	if want["sum"] != 15 || want["started"] != 1 || want["late_init"] != 9 || want["by_ref"] != 10 || want["by_global"] != 7 {
		t.Errorf("the original module answers %v; the test module is wrong", want)
	}
	t.Logf("answers %v, names %v", got, gotNames)
}

// watWithNames assembles WAT with its name section and tail calls (which
// wasmtest.WATSource leaves out).
func watWithNames(t *testing.T, src string) []byte {
	t.Helper()
	tool := wasmtest.RequireTool(t, "wat2wasm")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(tool, "--enable-tail-call", "--debug-names", in, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}
