// Command kubectl is upstream kubectl (k8s.io/kubectl v0.37.2) built from this module, so
// the tests exercise the real client against wasmplane without a downloaded binary.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// main mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go.
func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
