package schedplugin

import (
	"runtime"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

// CallBounds completes the call bounds of a scheduler's WASM runtime. A plugin's own bound
// defaults to the runtime's, not one fewer as for admission: a scheduler runs one cycle's
// Filter or Score at a time and its plugins in turn, so only one plugin ever has calls in
// flight, and the Filter walk calls it from as many workers as there are Ps. A per-plugin
// bound below that would only make the walk's workers queue for a slot (the parallel
// blocks then run one at a time, and a waiter pays for a timer and a wake-up) without
// keeping anything from another plugin; a P for the host is kept by the checkpoints and
// the suspension of a plugin that keeps running out of time, as for every guest.
func CallBounds(b wasm.CallBounds) wasm.CallBounds {
	if b.MaxConcurrentCalls <= 0 {
		b.MaxConcurrentCalls = runtime.GOMAXPROCS(0)
	}
	if b.MaxConcurrentCallsPerPlugin <= 0 {
		b.MaxConcurrentCallsPerPlugin = b.MaxConcurrentCalls
	}
	return b
}
