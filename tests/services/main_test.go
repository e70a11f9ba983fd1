// Package services_test checks Services end to end through client-go against the real
// server: cluster IP and node port allocation, the `kubernetes` Service, the Endpoints and
// EndpointSlice controllers following a Deployment's pods on a WASI node, and the
// kube-root-ca.crt publisher.
package services_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/examples/workloads"
	"k8s.io/apimachinery/pkg/util/wait"
)

// modules are the example workloads, built once for the test binary.
var modules map[string]string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wasmplane-workloads-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if modules, err = workloads.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// poll waits for cond, failing the test with what after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
