//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

//go:wasmexport wasmplane_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport wasmplane_alloc
func wasmAlloc(size uint32) uint32 { return Alloc(size, addr) }

//go:wasmexport wasmplane_free
func wasmFree(ptr, size uint32) { Free(ptr) }

//go:wasmexport configure
func wasmConfigure(ptr, n uint32) uint64 { return Pack(Serve(Input(ptr, n), Configure)) }

//go:wasmimport wasmplane log
func hostLog(level, ptr, n uint32)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// Pack returns the ABI §3 result for a response.
func Pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(addr(b))<<32 | uint64(len(b))
}

// Log sends a message to the host log.
func Log(level int, msg string) {
	if msg == "" {
		return
	}
	hostLog(uint32(level), uint32(uintptr(unsafe.Pointer(unsafe.StringData(msg)))), uint32(len(msg)))
}
