package wasmplane

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

// TestRequestReads: the paths given, over one call or several, are the configure
// answer's "reads", in order.
func TestRequestReads(t *testing.T) {
	tests := []struct {
		name  string
		calls [][]string
		want  []string
	}{
		{"none", nil, nil},
		{"one call", [][]string{{"operation", "object.metadata.labels"}}, []string{"operation", "object.metadata.labels"}},
		{"two calls", [][]string{{"kind"}, {"object.spec.containers", "object.spec.initContainers"}}, []string{"kind", "object.spec.containers", "object.spec.initContainers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := guest.Flags
			t.Cleanup(func() { guest.Flags = saved })
			guest.Flags = abi.ConfigureResponse{}
			for _, paths := range tt.calls {
				RequestReads(paths...)
			}
			out, err := guest.Configure([]byte(`{"plugin":{"name":"p"},"config":{}}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got abi.ConfigureResponse
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if !slices.Equal(got.Reads, tt.want) {
				t.Fatalf("reads %q in %s, want %q", got.Reads, out, tt.want)
			}
		})
	}
}
