// Package langs_test builds the C, AssemblyScript, Rust and WAT example plugins from
// source with their toolchains and runs them through the host (plugins/wasm) with the
// same requests as the Go examples' tests, so every language shows the same behaviour.
// A missing toolchain skips a test locally and fails it when CI is set, since CI
// installs them (scripts/install-toolchains.sh).
package langs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// need skips the test (fails it under CI) when a toolchain prerequisite is missing.
func need(tb testing.TB, ok bool, what string) {
	tb.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s is not installed (run scripts/install-toolchains.sh)", what)
	}
	tb.Skipf("%s is not installed (run scripts/install-toolchains.sh)", what)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// builds memoizes modules per test binary: several tests share one build.
var builds sync.Map // key -> *built

type built struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildOnce runs make once per key; make writes the module to the path it is given.
func buildOnce(tb testing.TB, key string, make func(out string) error) []byte {
	tb.Helper()
	v, _ := builds.LoadOrStore(key, &built{})
	b := v.(*built)
	b.once.Do(func() {
		dir, err := os.MkdirTemp(wasmtest.TempDir(tb), "build-")
		if err != nil {
			b.err = err
			return
		}
		out := filepath.Join(dir, "plugin.wasm")
		if b.err = make(out); b.err == nil {
			b.wasm, b.err = os.ReadFile(out)
		}
	})
	if b.err != nil {
		tb.Fatalf("build %s: %v", key, b.err)
	}
	return b.wasm
}

// run runs a toolchain command in dir and folds its output into the error.
func run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", name, args, err, out.String())
	}
	return nil
}

// language is one guest language: how to build one of its examples.
type language struct {
	name  string
	build func(tb testing.TB, example string) []byte
}

// languages lists every language whose examples these tests build.
var languages = []language{
	{"c", buildC},
	{"assemblyscript", buildAS},
	{"rust", buildRust},
	{"wat", buildWAT},
}

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
