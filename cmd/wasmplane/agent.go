package main

import (
	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/cmd/internal/agentcmd"
)

// newAgent is `wasmplane agent`: a kubelet (and the built-in runtime) joining a cluster.
// The same command is the whole of the smaller cmd/wasmplane-agent binary.
func newAgent() *cobra.Command { return agentcmd.New("agent") }
