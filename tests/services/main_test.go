// Package services_test checks Services end to end through client-go against the real
// server: cluster IP and node port allocation, the `kubernetes` Service, the Endpoints and
// EndpointSlice controllers following a Deployment's pods on a WASI node, and the
// kube-root-ca.crt publisher.
package services_test

import (
	"os"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// modules are the example workloads, built once for the test binary.
var modules map[string]string

func TestMain(m *testing.M) { os.Exit(testserver.RunWithWorkloads(m, &modules, nil)) }
