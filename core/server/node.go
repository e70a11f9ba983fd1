package server

import (
	"context"

	"github.com/wasmplane/wasmplane/core/node"
)

// KubeletTLS names the kubelet's serving pair and the CA that signs the clients it
// accepts; it is node.KubeletTLS, which the node agent uses without this package.
type KubeletTLS = node.KubeletTLS

// NodeConfig is a kubelet (and, by default, the built-in runtime) to run: node.Config.
type NodeConfig = node.Config

// StartNode is node.Start for callers that already use this package (tests).
func StartNode(ctx context.Context, cfg NodeConfig) (stop func(), err error) {
	return node.Start(ctx, cfg)
}
