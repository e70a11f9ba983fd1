package server

import (
	"context"

	"github.com/wasmplane/wasmplane/core/node"
	"k8s.io/client-go/rest"
)

// KubeletKubeconfigName is the file under an agent's root dir holding the node client
// credentials obtained by TLS bootstrapping.
const KubeletKubeconfigName = node.KubeletKubeconfigName

// DefaultBootstrapTimeout bounds how long a joining node waits for its certificate.
const DefaultBootstrapTimeout = node.DefaultBootstrapTimeout

// BootstrapOptions configures LoadOrBootstrapKubeconfig: node.BootstrapOptions.
type BootstrapOptions = node.BootstrapOptions

// LoadOrBootstrapKubeconfig is node.LoadOrBootstrapKubeconfig, for callers that already
// use this package (tests).
func LoadOrBootstrapKubeconfig(ctx context.Context, opts BootstrapOptions) (*rest.Config, error) {
	return node.LoadOrBootstrapKubeconfig(ctx, opts)
}
