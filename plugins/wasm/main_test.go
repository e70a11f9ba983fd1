package wasm

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// newTestRuntime returns a runtime with its own metrics registry and a quiet logger,
// closed when the test ends. Its plugins are never suspended (SuspendAfter -1): the tests
// that fault a plugin over and over check each fault; TestFaultyPluginIsSuspended checks
// the suspension.
func newTestRuntime(tb testing.TB) (*Runtime, *prometheus.Registry) {
	tb.Helper()
	return newTestRuntimeWith(tb, RuntimeConfig{CallBounds: CallBounds{SuspendAfter: -1}})
}

// newTestRuntimeWith is newTestRuntime with cfg's other settings.
func newTestRuntimeWith(tb testing.TB, cfg RuntimeConfig) (*Runtime, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	cfg.CacheDir, cfg.Registerer = wasmtest.CacheDir(tb), reg
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := NewRuntime(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, reg
}

// load compiles and loads a module with the given limits, closing it with the test.
func load(tb testing.TB, r *Runtime, wasm []byte, cfg PluginConfig) *Plugin {
	tb.Helper()
	ctx := context.Background()
	m, err := r.Compile(ctx, wasm, Digest(wasm))
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close(ctx)
	if cfg.Name == "" {
		cfg.Name = tb.Name()
	}
	p, err := r.Load(ctx, m, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}
