package langs_test

import (
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// buildWAT assembles examples/plugins/wat/<example>/<example>.wat with wabt's wat2wasm.
func buildWAT(tb testing.TB, example string) []byte {
	tb.Helper()
	return wasmtest.WAT(tb, example+"/"+example)
}
