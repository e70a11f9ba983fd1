// Package e2e drives the whole flow of the seed through the real `wasmplane` binary, as a
// user would: `wasmplane up` as a subprocess (HTTPS API server on embedded etcd,
// controllers, scheduler, kubelet and the built-in WASI runtime), the built-in kubectl,
// `wasmplane plugin apply`, `wasmplane image import` and client-go. Nothing in-process:
// every step crosses the same boundaries a user's requests do.
package e2e

import (
	"os"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// wasmplaneBin is the `wasmplane` binary built once by TestMain; artifacts are the WASI
// workloads and plugin modules, built once on first use.
var (
	wasmplaneBin string
	artifacts    = &buildCache{}
)

func TestMain(m *testing.M) {
	code := testserver.RunWithBinary(m, "github.com/wasmplane/wasmplane/cmd/wasmplane", &wasmplaneBin)
	artifacts.cleanup()
	os.Exit(code)
}
