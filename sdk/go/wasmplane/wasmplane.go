// Package wasmplane is the entry point of the Go SDK for wasmplane plugins (ABI v1, see
// sdk/ABI.md). Build a plugin with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// Hooks are registered from init functions through the packages named after them
// (sdk/go/validate, sdk/go/score, …): importing such a package is what exports the hook,
// so a module exports exactly the hooks it implements. main is never called in a
// c-shared module; it must exist and may be empty.
package wasmplane

import (
	"fmt"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

// RegisterConfigure sets the function that receives the plugin's configuration once per
// instance; an error rejects the configuration and fails the plugin's load.
func RegisterConfigure(fn func(req *abi.ConfigureRequest) error) { guest.ConfigureFunc = fn }

// RequestFullPods asks the host for the whole Pod in filter/score requests instead of
// the compact pod document (ABI §7.5), for plugins that read fields abi.Pod lacks.
func RequestFullPods() { guest.Flags.FullPods = true }

// RequestCompactPods asks the host for the compact pod document (ABI §7.5) as the object
// of validate requests about Pods: a smaller document to encode and read, for plugins
// that read only what abi.Pod declares.
func RequestCompactPods() { guest.Flags.CompactPods = true }

// RequestObjectMetadata asks the host for the object metadata document (ABI §7.3) as the
// object and oldObject of validate requests about every kind — apiVersion, kind, and the
// name, generateName, namespace, uid, labels and annotations — for plugins about names,
// labels or annotations: the smallest request to encode and read. It wins over
// RequestCompactPods.
func RequestObjectMetadata() { guest.Flags.ObjectMetadata = true }

// RequestReads tells the host which members of validate requests the plugin reads, as
// dot-separated paths from the request's root ("operation", "object.metadata.labels",
// "object.spec.containers"): the host may leave the others out (ABI §7.1), and a smaller
// request costs less to write and to read. A member kept is written whole; the host may
// send more than is listed, never less. Paths that name no request member fail the
// plugin's load.
func RequestReads(paths ...string) { guest.Flags.Reads = append(guest.Flags.Reads, paths...) }

// RequestFullNodes asks the host for full Node objects in filter/score requests.
func RequestFullNodes() { guest.Flags.FullNodes = true }

// RequestRequested asks the host to send the resources already requested on each node.
func RequestRequested() { guest.Flags.Requested = true }

// Debug logs a message at debug level in the server log.
func Debug(msg string) { guest.Log(abi.LevelDebug, msg) }

// Info logs a message at info level in the server log.
func Info(msg string) { guest.Log(abi.LevelInfo, msg) }

// Warn logs a message at warn level in the server log.
func Warn(msg string) { guest.Log(abi.LevelWarn, msg) }

// Error logs a message at error level in the server log.
func Error(msg string) { guest.Log(abi.LevelError, msg) }

// Logf formats and logs a message at the given abi.Level*.
func Logf(level int, format string, args ...any) { guest.Log(level, fmt.Sprintf(format, args...)) }
