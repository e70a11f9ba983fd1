// Package apiserver holds the tests that run wasmplane's API server in-process, on its real
// embedded etcd and loopback ports, and drive it through client-go, controller-runtime
// and raw HTTP: aggregation, server-side apply and managedFields, authentication,
// authorization and tenancy, kubelet TLS bootstrapping, CustomResourceDefinitions,
// API Priority and Fairness, admission webhooks and an operator.
//
// They are one package so that they link one test binary.
package apiserver

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// controller-runtime logs through a process-wide logger that client-go's watchers also
	// reach before a manager's own is set; without one it warns with a stack trace.
	ctrllog.SetLogger(logr.FromSlogHandler(testserver.Logger().Handler()))
	// wasmtest.Main removes the plugin builds the WASM authenticator tests share.
	wasmtest.Main(m)
}
