// Package validate exports the validate hook of a wasmplane plugin: it allows or denies API requests.
package validate

import (
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
	"github.com/wasmplane/wasmplane/sdk/go/jsonview"
)

// handler is the handler set by Register; view the one set by RegisterView, served by
// guest.ServeValidateView (one of the two is nil).
var (
	handler func(in, dst []byte) ([]byte, error)
	view    func(jsonview.Value) (abi.ValidateResponse, error)
)

// Register sets the plugin's validate handler; call it from an init function. An error
// return becomes the ABI error envelope (the caller's failurePolicy applies).
func Register(fn func(req *abi.AdmissionRequest) (abi.ValidateResponse, error)) {
	// Decoded and encoded by hand: encoding/json would cost a Go guest most of a call.
	handler, view = guest.Admission(fn, guest.EncodeValidate), nil
}

// RegisterView sets the plugin's validate handler as Register does, for a handler that reads
// the request in place: req is the AdmissionRequest's JSON (sdk/ABI.md §7.3), and
// req.At("object", "metadata", "labels") or req.Get("operation").Is("CREATE") find what
// the plugin needs without decoding the rest. A plugin that reads a few fields of the
// request costs several times less CPU per call this way than with Register (none of the
// request or object is built in memory); req and what it yields alias the request and
// are valid until the handler returns.
func RegisterView(fn func(req jsonview.Value) (abi.ValidateResponse, error)) {
	handler, view = nil, fn
}

// Handle runs the registered handler on one encoded request, as the host's call does;
// it lets plugins unit-test their handler without WebAssembly.
func Handle(request []byte) []byte {
	return serve(request)
}

// serve answers one request as the registered handler does.
func serve(request []byte) []byte {
	switch {
	case view != nil:
		return guest.ServeValidateView(request, view)
	case handler != nil:
		return guest.Serve(request, handler)
	}
	return guest.ErrorResponse(errNotRegistered)
}

type notRegistered struct{}

func (notRegistered) Error() string { return "validate: no handler registered" }

var errNotRegistered = notRegistered{}
