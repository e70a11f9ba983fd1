// Package guest is the runtime shared by the Go SDK's hook packages: buffers handed to the
// host, response encoding, panics turned into error answers, and the configure flags.
// Its logic is portable so that it is unit-tested natively; only exports_wasip1.go is
// specific to the WebAssembly build.
package guest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// buffers keeps every buffer handed to the host reachable: the host writes into them
// between our calls, so the garbage collector must never see them as free.
var buffers = map[uint32][]byte{}

// lastPtr and last are the buffer allocated last, which is the host's input buffer for
// every call after the first (the host keeps it): Input finds it without a map lookup,
// whose code and memory are cold in a call that comes after the API server's other work.
var (
	lastPtr uint32
	last    []byte
)

// out holds the last response until the host's next call, as ABI §3 requires; its
// backing array is reused for the next response once the host has copied it.
var out []byte

// Flags are the members the SDK adds to the configure answer.
var Flags abi.ConfigureResponse

// ConfigureFunc is the plugin's configure handler, if it registered one.
var ConfigureFunc func(*abi.ConfigureRequest) error

// Input returns the request bytes the host wrote at ptr; ptr is always a buffer this SDK
// allocated, so no pointer arithmetic is needed.
func Input(ptr, n uint32) []byte {
	b, ok := last, ptr == lastPtr && ptr != 0
	if !ok {
		b, ok = buffers[ptr]
	}
	if !ok || uint32(len(b)) < n {
		return nil
	}
	return b[:n]
}

// Serve runs one hook: it calls h with the request and turns its answer, its error or its
// panic into the response bytes.
func Serve(in []byte, h func(in []byte, out []byte) ([]byte, error)) (resp []byte) {
	returned := false
	defer answerPanic(&resp, &returned)
	if in == nil {
		return ErrorResponse(errNotAllocated)
	}
	b, err := h(in, out[:0])
	returned = true
	if err != nil {
		return ErrorResponse(err)
	}
	out = b
	return b
}

// answerPanic, deferred by a hook, turns a panic of its handler into the error response.
// recover is called only when the handler did not return: a call that returns does not
// run it.
func answerPanic(resp *[]byte, returned *bool) {
	if *returned {
		return
	}
	if r := recover(); r != nil {
		*resp = ErrorResponse(fmt.Errorf("panic: %v", r))
	}
}

// notAllocated is the error of a call whose request is not in a buffer of this SDK.
type notAllocated struct{}

func (notAllocated) Error() string { return "request buffer was not allocated by wasmplane_alloc" }

var errNotAllocated = notAllocated{}

// ErrorResponse encodes the ABI §4 error envelope.
func ErrorResponse(err error) []byte {
	msg := err.Error()
	if msg == "" {
		msg = "plugin error"
	}
	b := append(out[:0], `{"error":`...)
	b = AppendString(b, msg)
	b = append(b, '}')
	out = b
	return b
}

// JSON is a handler helper: decode the request into Req, call fn, encode its answer.
func JSON[Req any, Resp any](fn func(*Req) (Resp, error)) func(in, dst []byte) ([]byte, error) {
	return func(in, dst []byte) ([]byte, error) {
		var req Req
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, fmt.Errorf("decode request: %w", err)
		}
		resp, err := fn(&req)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(resp)
		if err != nil {
			return nil, fmt.Errorf("encode response: %w", err)
		}
		return append(dst, b...), nil
	}
}

// Configure handles the configure hook.
func Configure(in, dst []byte) ([]byte, error) {
	var req abi.ConfigureRequest
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, fmt.Errorf("decode configure request: %w", err)
	}
	if ConfigureFunc != nil {
		if err := ConfigureFunc(&req); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(Flags)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// Alloc returns the address of a new buffer of size bytes and keeps it reachable.
func Alloc(size uint32, addr func([]byte) uint32) uint32 {
	if size == 0 {
		return 0
	}
	b := make([]byte, size)
	p := addr(b)
	buffers[p] = b
	lastPtr, last = p, b
	return p
}

// Free lets the garbage collector have a buffer back.
func Free(ptr uint32) {
	delete(buffers, ptr)
	if ptr == lastPtr {
		lastPtr, last = 0, nil
	}
}

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// AppendInt appends n in decimal.
func AppendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }
