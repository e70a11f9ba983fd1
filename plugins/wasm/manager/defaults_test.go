package manager

import (
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// TestAPIDefaultsMatchTheHost holds the API's statement of the default limits (which
// admission and quota charge by) equal to what the WASM host applies.
func TestAPIDefaultsMatchTheHost(t *testing.T) {
	if got, want := uint64(wasmv1.DefaultMemoryPages)*wasmv1.PageBytes, uint64(wasm.DefaultMemoryBytes); got != want {
		t.Errorf("memory %d, host %d", got, want)
	}
	if wasmv1.DefaultTimeout != wasm.DefaultTimeout {
		t.Errorf("timeout %v, host %v", wasmv1.DefaultTimeout, wasm.DefaultTimeout)
	}
	if wasmv1.DefaultMaxInputBytes != wasm.DefaultMaxInputBytes || wasmv1.DefaultMaxOutputBytes != wasm.DefaultMaxOutputBytes {
		t.Errorf("input/output %d/%d, host %d/%d", wasmv1.DefaultMaxInputBytes, wasmv1.DefaultMaxOutputBytes, wasm.DefaultMaxInputBytes, wasm.DefaultMaxOutputBytes)
	}
	if int(wasmv1.DefaultMaxInstances) != wasm.DefaultMaxInstances {
		t.Errorf("instances %d, host %d", wasmv1.DefaultMaxInstances, wasm.DefaultMaxInstances)
	}
}
