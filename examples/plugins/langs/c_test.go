package langs_test

import (
	"path/filepath"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// wasiLibc is where Debian's wasi-libc package installs the WASI C library; Debian's
// clang finds it there (multiarch layout) without a --sysroot.
const wasiLibc = "/usr/lib/wasm32-wasi/libc.a"

// buildC compiles examples/plugins/c/<example>/<example>.c with the C SDK into a WASI
// reactor, as sdk/c/README.md tells plugin authors to.
func buildC(tb testing.TB, example string) []byte {
	tb.Helper()
	clang := wasmtest.RequireTool(tb, "clang")
	wasmtest.RequireTool(tb, "wasm-ld")
	need(tb, exists(wasiLibc), "wasi-libc ("+wasiLibc+")")
	root := wasmtest.ModuleRoot(tb)
	return buildOnce(tb, "c:"+example, func(out string) error {
		return run(root, nil, clang, "--target=wasm32-wasi", "-mexec-model=reactor",
			"-O2", "-Wall", "-Werror", "-Wl,--strip-all", "-I", "sdk/c",
			filepath.Join("examples/plugins/c", example, example+".c"), "sdk/c/wasmplane.c", "-o", out)
	})
}
