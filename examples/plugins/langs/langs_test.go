// Package langs_test builds the C, AssemblyScript, Rust and WAT example plugins from
// source with their toolchains and runs them through the host (plugins/wasm) with the
// same requests as the Go examples' tests, so every language shows the same behaviour.
// A missing toolchain skips a test locally and fails it when CI is set, since CI
// installs them (scripts/install-toolchains.sh); see wasmtest.Need.
package langs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

func TestMain(m *testing.M) {
	wasmtest.MainUnlessShort(m, "builds every example with its language's toolchain")
}

// language is one guest language: how to build one of its examples (wasmtest builds
// them, for these tests and for tests/admission's through a real server).
type language = wasmtest.Language

// languages lists every language whose examples these tests build.
var languages = wasmtest.Languages()

// hostRuntime returns a host runtime sharing the binary's compilation cache.
func hostRuntime(tb testing.TB) *wasm.Runtime {
	tb.Helper()
	r, err := wasm.NewRuntime(context.Background(), wasm.RuntimeConfig{
		CacheDir: wasmtest.CacheDir(tb),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// load compiles a module and loads it as a plugin with the given config and, if given,
// limits (else one instance, at most four).
func load(tb testing.TB, r *wasm.Runtime, name string, mod []byte, config string, limits ...wasm.Limits) (*wasm.Plugin, error) {
	tb.Helper()
	ctx := context.Background()
	m, err := r.Compile(ctx, mod, wasm.Digest(mod))
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close(ctx)
	l := wasm.Limits{Instances: 1, MaxInstances: 4}
	if len(limits) > 0 {
		l = limits[0]
	}
	p, err := r.Load(ctx, m, wasm.PluginConfig{Name: name, Config: json.RawMessage(config), Limits: l})
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, nil
}

func mustLoad(tb testing.TB, r *wasm.Runtime, name string, mod []byte, config string, limits ...wasm.Limits) *wasm.Plugin {
	tb.Helper()
	p, err := load(tb, r, name, mod, config, limits...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
