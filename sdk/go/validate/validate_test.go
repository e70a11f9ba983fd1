package validate_test

import (
	"errors"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
	"github.com/wasmplane/wasmplane/sdk/go/validate"
)

// TestRegisterView: a handler registered with RegisterView reads the request in place,
// and its answer, error or panic is encoded as Register's would be.
func TestRegisterView(t *testing.T) {
	validate.RegisterView(func(req jsonview.Value) (abi.ValidateResponse, error) {
		switch op := req.Get("operation"); {
		case op.Is("CONNECT"):
			return abi.ValidateResponse{}, errors.New("cannot judge a connect")
		case op.Is("DELETE"):
			panic("no deletes here")
		case op.Is("UPDATE"):
			return abi.ValidateResponse{Allowed: true}, nil
		}
		if !req.At("object", "metadata", "labels").Has("team") {
			return abi.ValidateResponse{Code: 403, Reason: "Forbidden", Message: `label "team" is required`}, nil
		}
		return abi.ValidateResponse{Allowed: true, Warnings: []string{"kind " + req.At("kind", "kind").String()}}, nil
	})
	tests := []struct{ name, req, want string }{
		{"allowed", `{"uid":"1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"labels":{"team":"a"}}}}`,
			`{"allowed":true,"warnings":["kind Pod"]}`},
		{"denied", `{"uid":"2","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{}}}`,
			`{"allowed":false,"code":403,"reason":"Forbidden","message":"label \"team\" is required"}`},
		{"error", `{"operation":"CONNECT"}`, `{"error":"cannot judge a connect"}`},
		{"panic", `{"operation":"DELETE"}`, `{"error":"panic: no deletes here"}`},
		{"allowed after a panic", `{"operation":"UPDATE"}`, `{"allowed":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(validate.Handle([]byte(tt.req))); got != tt.want {
				t.Fatalf("answer %s, want %s", got, tt.want)
			}
		})
	}
}
