// Command wasmplane-agent is `wasmplane agent` alone: a kubelet and the built-in WASI
// runtime joining a cluster. It links none of the API server, etcd, controllers or
// kubectl, whose package initialisation the one `wasmplane` binary pays at every start;
// a node that only runs pods needs less memory with it.
//
//	wasmplane-agent --server https://… --token <id>.<secret> --certificate-authority ca.crt
package main

import (
	"os"

	"github.com/wasmplane/wasmplane/cmd/internal/agentcmd"
)

func main() {
	cmd := agentcmd.New("wasmplane-agent")
	cmd.SilenceUsage = true
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
