// Package nodeports is the NodePorts plugin: a pod's host ports must be free on the node.
package nodeports

import (
	"context"
	"encoding/json"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
)

// ErrReason is Kubernetes' reason.
const ErrReason = "node(s) didn't have free ports for the requested pod ports"

// NodePorts is the plugin.
type NodePorts struct{}

// New is the plugin factory.
func New(context.Context, json.RawMessage, framework.Handle) (framework.Plugin, error) {
	return &NodePorts{}, nil
}

// Name implements Plugin.
func (*NodePorts) Name() string { return names.NodePorts }

const preFilterKey framework.StateKey = "PreFilter" + names.NodePorts

type preFilterState []v1.ContainerPort

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s preFilterState) Clone() framework.StateData { return s }

// PreFilter collects the pod's host ports; pods without any are skipped.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	ports := framework.PodHostPorts(pod)
	if len(ports) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, preFilterState(ports))
	return nil, nil
}

// Filter implements FilterPlugin.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	ports, err := framework.ReadAs[preFilterState](state, preFilterKey)
	if err != nil {
		ports = framework.PodHostPorts(pod)
	}
	for _, p := range ports {
		if ni.UsedPorts.CheckConflict(p.HostIP, string(p.Protocol), p.HostPort) {
			return framework.NewStatus(framework.Unschedulable, ErrReason)
		}
	}
	return nil
}
