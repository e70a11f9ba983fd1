//go:build wasip1

package validate

import "github.com/wasmplane/wasmplane/sdk/go/internal/guest"

//go:wasmexport validate
func export(ptr, n uint32) uint64 { return guest.Pack(serve(guest.Input(ptr, n))) }
