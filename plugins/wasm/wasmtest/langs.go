package wasmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/regoinput"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
)

// The example plugins of the other SDK languages live in examples/plugins/<language>/
// <example>/ and are built with the command lines of plugins/wasm/toolkit/toolchain, as
// `wasmplane plugin build` builds them. examples/plugins/langs tests them at the ABI
// level; tests/admission drives them through a real server.

// Language is one guest language other than Go: how to build one of its examples.
type Language struct {
	// Name is the directory under examples/plugins ("c", "assemblyscript", "rust", "wat").
	Name string
	// Build builds examples/plugins/<Name>/<example> and returns the module.
	Build func(tb testing.TB, example string) []byte
}

// Languages lists every non-Go language with examples, in a fixed order.
func Languages() []Language {
	return []Language{
		{"c", C},
		{"assemblyscript", AssemblyScript},
		{"rust", Rust},
		{"wat", WATExample},
	}
}

// Need skips the test when a toolchain prerequisite is missing, or fails it when the CI
// variable is set, because CI installs every toolchain (scripts/install-toolchains.sh).
func Need(tb testing.TB, ok bool, what string) {
	tb.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("wasmtest: %s is not installed (run scripts/install-toolchains.sh)", what)
	}
	tb.Skipf("wasmtest: %s is not installed (run scripts/install-toolchains.sh)", what)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// wasiLibc is where Debian's wasi-libc package installs the WASI C library; Debian's
// clang finds it there (multiarch layout) without a --sysroot.
const wasiLibc = "/usr/lib/wasm32-wasi/libc.a"

// C compiles examples/plugins/c/<example>/<example>.c with the C SDK into a WASI reactor,
// as sdk/c/README.md tells plugin authors to.
func C(tb testing.TB, example string) []byte {
	tb.Helper()
	return CFile(tb, filepath.Join("examples/plugins/c", example, example+".c"))
}

// CFile compiles one C source (a path from the module root) with the C SDK, as C builds
// an example.
func CFile(tb testing.TB, source string) []byte {
	tb.Helper()
	clang := RequireTool(tb, "clang")
	RequireTool(tb, "wasm-ld")
	Need(tb, exists(wasiLibc), "wasi-libc ("+wasiLibc+")")
	root := ModuleRoot(tb)
	return buildExample(tb, "c:"+source, func(out, _ string) error {
		args := toolchain.CArgs(out, "sdk/c", source)
		return runTool(root, clang, args[1:]...)
	})
}

// AssemblyScript compiles examples/plugins/assemblyscript/<example>/<example>.ts with the
// asc that sdk/assemblyscript pins (npm ci there), as sdk/assemblyscript/README.md shows.
// Under -short it skips the test: the build takes tens of seconds.
func AssemblyScript(tb testing.TB, example string) []byte {
	tb.Helper()
	return AssemblyScriptFile(tb, filepath.Join("examples/plugins/assemblyscript", example, example+".ts"))
}

// AssemblyScriptFile compiles one AssemblyScript entry file (a path from the module root),
// as AssemblyScript builds an example.
func AssemblyScriptFile(tb testing.TB, entry string) []byte {
	tb.Helper()
	if testing.Short() {
		tb.Skip("slow: compiles the plugin with asc under node; runs without -short")
	}
	node := RequireTool(tb, "node")
	root := ModuleRoot(tb)
	Need(tb, exists(filepath.Join(root, toolchain.ASCompiler)), "assemblyscript (npm ci in sdk/assemblyscript)")
	return buildExample(tb, "as:"+entry, func(out, _ string) error {
		args := toolchain.ASArgs(toolchain.ASCompiler, out, entry, toolchain.ASAbort)
		return runTool(root, node, args[1:]...)
	})
}

// Rust compiles the SDK crate and examples/plugins/rust/<example> with rustc alone (what
// cargo build --release does with the example's Cargo.toml, without needing cargo).
// Under -short it skips the test: the build takes tens of seconds.
func Rust(tb testing.TB, example string) []byte {
	tb.Helper()
	return RustFile(tb, strings.ReplaceAll(example, "-", "_"), filepath.Join("examples/plugins/rust", example, "src/lib.rs"))
}

// RustFile compiles the crate crateName whose root is lib (a path from the module root)
// against the SDK crate, as Rust builds an example.
func RustFile(tb testing.TB, crateName, lib string) []byte {
	tb.Helper()
	if testing.Short() {
		tb.Skip("slow: compiles the Rust SDK crate and the plugin with rustc; runs without -short")
	}
	rustc, target, err := toolchain.Rust()
	Need(tb, err == nil, "a rustc with the wasm32-wasi standard library (libstd-rust-dev-wasm32)")
	root := ModuleRoot(tb)
	return buildExample(tb, "rust:"+lib, func(out, work string) error {
		for _, s := range toolchain.RustArgs(rustc, target, out, work, "sdk/rust/src/lib.rs", crateName, lib) {
			if err := runTool(root, s[0], s[1:]...); err != nil {
				return err
			}
		}
		return nil
	})
}

// WATExample assembles examples/plugins/wat/<example>/<example>.wat with wabt's wat2wasm.
func WATExample(tb testing.TB, example string) []byte {
	tb.Helper()
	return WAT(tb, example+"/"+example)
}

// buildExample runs make once per key per test binary; make writes the module to out and
// may use work for intermediate files.
func buildExample(tb testing.TB, key string, make func(out, work string) error) []byte {
	tb.Helper()
	tmp := TempDir(tb)
	wasm, err := cache.get(key, func() ([]byte, error) {
		dir, err := os.MkdirTemp(tmp, "build-")
		if err != nil {
			return nil, err
		}
		out := filepath.Join(dir, "plugin.wasm")
		if err := make(out, dir); err != nil {
			return nil, err
		}
		return os.ReadFile(out)
	})
	if err != nil {
		tb.Fatalf("wasmtest: build %s: %v", key, err)
	}
	return wasm
}

// runTool runs a toolchain command in dir and folds its output into the error.
func runTool(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out.String())
	}
	return nil
}

// LinkASCompiler gives the AssemblyScript project dir (one `wasmplane plugin init` wrote)
// the compiler its package.json pins, as `npm install` there would, without the network:
// dir/node_modules links to the sdk/assemblyscript/node_modules of the checkout at root
// (npm ci there pins the same version). It skips the test, or fails it under CI, when
// that is absent.
func LinkASCompiler(tb testing.TB, root, dir string) {
	tb.Helper()
	mods := filepath.Join(root, "sdk", "assemblyscript", "node_modules")
	Need(tb, exists(filepath.Join(mods, "assemblyscript", "bin", "asc.js")), "assemblyscript (npm ci in sdk/assemblyscript)")
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		tb.Fatal(err)
	}
}

// Rego compiles examples/plugins/rego/<example>/<example>.rego with OPA into the module of
// its violation rule, as `wasmplane plugin build` does.
func Rego(tb testing.TB, example string) []byte {
	tb.Helper()
	src, err := os.ReadFile(filepath.Join(ModuleRoot(tb), "examples/plugins/rego", example, example+".rego"))
	if err != nil {
		tb.Fatalf("wasmtest: %v", err)
	}
	return RegoSource(tb, string(src), "")
}

// RegoSource compiles a Rego policy with OPA and records what it reads of its input
// (regoinput), as `wasmplane plugin build` does; entrypoint defaults to the rule the
// build would pick (toolchain.RegoEntrypoint).
func RegoSource(tb testing.TB, src, entrypoint string) []byte {
	tb.Helper()
	return regoSource(tb, src, entrypoint, true)
}

// RegoSourceUnrecorded compiles a Rego policy as `opa build` alone does: the module has
// no record of what the policy reads, and the host gives it the whole request.
func RegoSourceUnrecorded(tb testing.TB, src, entrypoint string) []byte {
	tb.Helper()
	return regoSource(tb, src, entrypoint, false)
}

func regoSource(tb testing.TB, src, entrypoint string, record bool) []byte {
	tb.Helper()
	opa := RequireTool(tb, "opa")
	if entrypoint == "" {
		ep, ok := toolchain.RegoEntrypoint([]byte(src))
		if !ok {
			tb.Fatalf("wasmtest: no violation, deny or allow rule in the policy")
		}
		entrypoint = ep
	}
	return buildExample(tb, fmt.Sprintf("rego:%v:%s:%s", record, entrypoint, src), func(out, work string) error {
		policy := filepath.Join(work, "policy.rego")
		if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
			return err
		}
		bundle := filepath.Join(work, "bundle.tar.gz")
		args := toolchain.RegoArgs(bundle, entrypoint, policy)
		if err := runTool(work, opa, args[1:]...); err != nil {
			return err
		}
		if err := toolchain.Unbundle(bundle, out); err != nil || !record {
			return err
		}
		_, err := regoinput.RecordFile(out, policy)
		return err
	})
}
