// Package e2e holds the end-to-end tests that drive wasmplane through real binaries and
// clients, as a user would: the `wasmplane` binary as a subprocess (`wasmplane up`, the
// built-in kubectl, `wasmplane plugin apply`, `wasmplane image import`), the real kubectl
// and Helm built from tests/cmd, client-go against every resource, and kubelets on the
// built-in WASI runtime running the example workloads. The tests that need no binary and
// run the server in-process live in the other packages under tests/.
//
// They are one package so that the slow end-to-end suite links one test binary; under
// -short it runs nothing (TestMain says why).
package e2e

import (
	"os"
	"testing"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// The binaries and modules TestMain builds once for the whole test binary: `wasmplane`,
// the real kubectl and Helm, and the example WASI workloads (name to module path).
// artifacts are the workloads and plugin modules the subprocess tests build on first use.
var (
	wasmplaneBin string
	kubectlBin   string
	helmBin      string
	modules      map[string]string
	artifacts    = &buildCache{}
)

func TestMain(m *testing.M) {
	code := testserver.RunWithWorkloads(m, &modules, map[string]*string{
		"github.com/wasmplane/wasmplane/cmd/wasmplane":     &wasmplaneBin,
		"github.com/wasmplane/wasmplane/tests/cmd/kubectl": &kubectlBin,
		"github.com/wasmplane/wasmplane/tests/cmd/helm":    &helmBin,
	})
	artifacts.cleanup()
	wasmtest.RemoveTemp() // plugin builds (the kubectl Rego test's)
	os.Exit(code)
}
