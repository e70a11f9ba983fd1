package langs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

var (
	rustOnce           sync.Once
	rustcPath, rustTgt string
)

// findRust returns a rustc that has a WASI standard library, and the target name it uses.
// Debian's rustc (/usr/bin/rustc with libstd-rust-dev-wasm32) is tried after $RUSTC and
// before the one on PATH, which on a rustup machine lacks the target and cannot fetch it.
func findRust() (string, string) {
	rustOnce.Do(func() {
		var cands []string
		if r := os.Getenv("RUSTC"); r != "" {
			cands = append(cands, r)
		}
		cands = append(cands, "/usr/bin/rustc")
		if p, err := exec.LookPath("rustc"); err == nil {
			cands = append(cands, p)
		}
		for _, c := range cands {
			out, err := exec.Command(c, "--print", "sysroot").Output()
			if err != nil {
				continue
			}
			sysroot := strings.TrimSpace(string(out))
			for _, tgt := range []string{"wasm32-wasip1", "wasm32-wasi"} {
				if exists(filepath.Join(sysroot, "lib", "rustlib", tgt, "lib")) {
					rustcPath, rustTgt = c, tgt
					return
				}
			}
		}
	})
	return rustcPath, rustTgt
}

// buildRust compiles the SDK crate and examples/plugins/rust/<example> with rustc alone
// (what cargo build --release does with the example's Cargo.toml, without needing cargo).
func buildRust(tb testing.TB, example string) []byte {
	tb.Helper()
	rustc, target := findRust()
	need(tb, rustc != "", "a rustc with the wasm32-wasi standard library (libstd-rust-dev-wasm32)")
	root := wasmtest.ModuleRoot(tb)
	opt := []string{"--edition", "2021", "--target", target, "-C", "opt-level=s", "-C", "panic=abort"}
	return buildOnce(tb, "rust:"+example, func(out string) error {
		dir := filepath.Dir(out)
		sdk := append([]string{"--crate-type", "rlib", "--crate-name", "wasmplane", "--out-dir", dir}, opt...)
		if err := run(root, nil, rustc, append(sdk, "sdk/rust/src/lib.rs")...); err != nil {
			return err
		}
		args := append([]string{"--crate-type", "cdylib", "--crate-name", strings.ReplaceAll(example, "-", "_"),
			"-C", "lto", "-C", "strip=symbols", "-L", dir, "--extern", "wasmplane=" + filepath.Join(dir, "libwasmplane.rlib"), "-o", out}, opt...)
		return run(root, nil, rustc, append(args, filepath.Join("examples/plugins/rust", example, "src/lib.rs"))...)
	})
}
