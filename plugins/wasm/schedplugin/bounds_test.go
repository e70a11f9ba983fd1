package schedplugin

import (
	"runtime"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm"
)

func TestCallBounds(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name     string
		in, want wasm.CallBounds
	}{
		{"defaults: every slot to the one plugin in flight", wasm.CallBounds{}, wasm.CallBounds{MaxConcurrentCalls: procs, MaxConcurrentCallsPerPlugin: procs}},
		{"the runtime's bound set", wasm.CallBounds{MaxConcurrentCalls: 6}, wasm.CallBounds{MaxConcurrentCalls: 6, MaxConcurrentCallsPerPlugin: 6}},
		{"both set are kept", wasm.CallBounds{MaxConcurrentCalls: 4, MaxConcurrentCallsPerPlugin: 1}, wasm.CallBounds{MaxConcurrentCalls: 4, MaxConcurrentCallsPerPlugin: 1}},
		{"the suspension is left alone", wasm.CallBounds{SuspendAfter: -1}, wasm.CallBounds{MaxConcurrentCalls: procs, MaxConcurrentCallsPerPlugin: procs, SuspendAfter: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CallBounds(tc.in); got != tc.want {
				t.Errorf("CallBounds(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}
