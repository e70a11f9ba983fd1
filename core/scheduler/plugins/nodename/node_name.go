// Package nodename is the NodeName plugin: a pod with spec.nodeName fits only that node.
package nodename

import (
	"context"
	"encoding/json"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
)

// ErrReason is Kubernetes' reason.
const ErrReason = "node(s) didn't match the requested node name"

// NodeName is the plugin.
type NodeName struct{}

// New is the plugin factory.
func New(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) {
	return &NodeName{}, nil
}

// Name implements Plugin.
func (*NodeName) Name() string { return names.NodeName }

// Filter implements FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != ni.Node().Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}
