package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl runs the real kubectl (k8s.io/kubectl, built in as k3s does) with args. When
// neither KUBECONFIG nor --kubeconfig is given, it uses the admin kubeconfig of the data
// dir ($WASMPLANE_DATA_DIR, default ./.wasmplane).
func runKubectl(args []string) int {
	if err := setKubectlVersion(); err != nil {
		util.CheckErr(fmt.Errorf("setting kubectl's version: %w", err))
		return 1
	}
	if os.Getenv("KUBECONFIG") == "" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig") }) {
		dir := os.Getenv("WASMPLANE_DATA_DIR")
		if dir == "" {
			dir = ".wasmplane"
		}
		if kc := filepath.Join(dir, "admin.kubeconfig"); fileExists(kc) {
			_ = os.Setenv("KUBECONFIG", kc)
		}
	}
	// kubectl reads its arguments (and plugin lookups) from os.Args.
	os.Args = append([]string{"kubectl"}, args...)
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
		return 1
	}
	return 0
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newKubectl documents the kubectl subcommand; main dispatches to runKubectl before cobra
// parses anything, so kubectl's own flags work unchanged.
func newKubectl() *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl [kubectl arguments]",
		Short:              "Run the built-in kubectl (v1.37) against this control plane",
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(runKubectl(args))
		},
	}
}
