// Package services_test checks Services end to end through client-go against the real
// server: cluster IP and node port allocation, the `kubernetes` Service, the Endpoints and
// EndpointSlice controllers following a Deployment's pods on a WASI node, and the
// kube-root-ca.crt publisher.
package services_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"k8s.io/apimachinery/pkg/util/wait"
)

// modules are the example workloads, built once for the test binary.
var modules map[string]string

func TestMain(m *testing.M) { os.Exit(testserver.RunWithWorkloads(m, &modules, nil)) }

// poll waits for cond, failing the test with what after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
