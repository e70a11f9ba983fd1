package main

import "testing"

// TestAgentCommand checks that `wasmplane agent` is still there, with the flags the
// documentation and the benchmarks use (its behaviour is tested in agentcmd).
func TestAgentCommand(t *testing.T) {
	cmd, _, err := newRoot().Find([]string{"agent"})
	if err != nil || cmd.Name() != "agent" {
		t.Fatalf("wasmplane agent: %v, %v", cmd, err)
	}
	for _, f := range []string{"server", "token", "kubeconfig", "node-name", "container-runtime-endpoint", "root-dir", "kubelet-port", "max-pods"} {
		if cmd.Flags().Lookup(f) == nil {
			t.Errorf("wasmplane agent has no --%s", f)
		}
	}
}
