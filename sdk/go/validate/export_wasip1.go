//go:build wasip1

package validate

import "github.com/wasmplane/wasmplane/sdk/go/internal/guest"

//go:wasmexport validate
func export(ptr, n uint32) uint64 {
	if handler == nil {
		return guest.Pack(guest.ErrorResponse(errNotRegistered))
	}
	return guest.Pack(guest.Serve(guest.Input(ptr, n), handler))
}
