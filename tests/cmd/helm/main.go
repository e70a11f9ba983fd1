// Command helm is upstream Helm (helm.sh/helm/v4 v4.3.2) built from this module, so the
// tests exercise the real client against wasmplane without a downloaded binary, and CI
// builds it with the module's own pinned dependencies.
package main

import (
	"errors"
	"log/slog"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

// main mirrors helm.sh/helm/v4/cmd/helm/helm.go, less the cloud auth plugins that a
// loopback server with an admin kubeconfig does not need.
func main() {
	// Helm names its field manager "helm" whatever the binary is called; the test binary
	// keeps that so the managedFields it writes are those a real installation writes.
	kube.ManagedFieldsManager = "helm"

	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
