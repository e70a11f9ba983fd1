package langs_test

import (
	"path/filepath"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// buildAS compiles examples/plugins/assemblyscript/<example>/<example>.ts with the asc
// that sdk/assemblyscript pins (npm ci there), as sdk/assemblyscript/README.md shows.
func buildAS(tb testing.TB, example string) []byte {
	tb.Helper()
	node := wasmtest.RequireTool(tb, "node")
	root := wasmtest.ModuleRoot(tb)
	asc := filepath.Join(root, "sdk/assemblyscript/node_modules/assemblyscript/bin/asc.js")
	need(tb, exists(asc), "assemblyscript (npm ci in sdk/assemblyscript)")
	return buildOnce(tb, "as:"+example, func(out string) error {
		return run(root, nil, node, asc, filepath.Join("examples/plugins/assemblyscript", example, example+".ts"),
			"-o", out, "-O3", "--noAssert", "--use", "abort=sdk/assemblyscript/assembly/abi/abort")
	})
}
