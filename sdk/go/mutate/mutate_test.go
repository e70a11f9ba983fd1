package mutate_test

import (
	"encoding/json"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
	"github.com/wasmplane/wasmplane/sdk/go/mutate"
)

// TestRegisterView: a mutate handler registered with RegisterView reads the request in
// place and its patch is encoded as Register's would be.
func TestRegisterView(t *testing.T) {
	mutate.RegisterView(func(req jsonview.Value) (abi.MutateResponse, error) {
		if req.At("object", "metadata", "labels").Has("team") {
			return abi.MutateResponse{Allowed: true}, nil
		}
		v, _ := json.Marshal(req.Get("namespace").String())
		return abi.MutateResponse{Allowed: true, Patch: []abi.PatchOperation{{Op: "add", Path: "/metadata/labels/team", Value: v}}}, nil
	})
	tests := []struct{ name, req, want string }{
		{"unchanged", `{"namespace":"a","object":{"metadata":{"labels":{"team":"x"}}}}`, `{"allowed":true}`},
		{"patched", `{"namespace":"a\"b","object":{"metadata":{"labels":{}}}}`,
			`{"allowed":true,"patch":[{"op":"add","path":"/metadata/labels/team","value":"a\"b"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(mutate.Handle([]byte(tt.req))); got != tt.want {
				t.Fatalf("answer %s, want %s", got, tt.want)
			}
		})
	}
}
